// Package providertest is the conformance suite every providers.Provider must pass.
//
// A provider's own test calls Run with a constructor and Options describing what the provider
// needs from its environment (backend nodes, whether it reports hostnames, how long a call may
// take). Run checks the contract of package providers as subtests: Ensure reports an ingress per
// requested IP family, is idempotent and agrees with Get; updates to ports and nodes converge
// without moving the address; Delete is idempotent and leaves Get with ErrNotFound; distinct
// Services get distinct addresses; requests outside the provider's Capabilities are rejected
// with an *providers.InvalidError before anything is created; concurrent Ensure calls are safe.
//
// Every subtest deletes what it created, also when it fails, so the suite can run against a
// real cloud account or an emulator. Subtests skip themselves when the provider's Capabilities
// make them meaningless (for example the session-affinity rejection for a provider that
// supports affinity checks acceptance instead).
package providertest
