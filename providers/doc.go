// Package providers owns the seam between Portico's controllers and the infrastructure that
// carries load-balancer traffic (an AWS load balancer, a bare-metal VIP announced from nodes, or
// the in-memory reference used by tests).
//
// It holds four things and nothing else:
//
//   - the Provider interface (Name, Capabilities, ParseOptions, Ensure, Get, Delete);
//   - the Plugin / Config / Env contract through which a provider joins Portico: each provider
//     package exports a Plugin whose Config owns the provider's defaults, flags ("--<name>-..."),
//     config-file keys, validation and construction;
//   - the desired-load-balancer model (LoadBalancer and the types it is built from, including
//     the provider-owned ServiceOptions slot) and the observed Status a provider reports back;
//   - the typed errors: ErrNotFound, *InvalidError (terminal: bad or unsupported input) and
//     *RetryError (retry after a fixed delay). Any other error is transient and retried with
//     backoff. Callers branch on them with errors.Is / errors.As, never on message text.
//
// # Contract
//
// Every implementation honours the same contract, checked by the conformance suite in
// providers/providertest:
//
//   - Declarative: Ensure receives the complete desired load balancer on every call and
//     converges to it, creating, updating or repairing drift as needed. There is no separate
//     create/update path and no partial request.
//   - No raw Service: the controller builds the LoadBalancer from the Service, its annotations
//     and the eligible nodes; Ensure sees only the model. A provider's own annotation keys reach
//     it parsed and typed: the controller calls its ParseOptions (a pure function of the
//     annotations, declared and documented in package annotations) and hands the result back in
//     LoadBalancer.Options. The provider-neutral settings (internal, source ranges, requested
//     IPs) are model fields. The one exception is state a provider must rebuild after a restart:
//     the bare-metal provider reads the status of its Services (read-only, through Env) to learn
//     which VIPs they already hold.
//   - No API writes: a provider never talks to the Kubernetes API server. It returns a Status;
//     the controller reports it on the Service.
//   - Idempotent: calling Ensure twice with the same model changes nothing and returns the same
//     Status; Delete of something that does not exist succeeds; Get of it returns ErrNotFound.
//   - Honest capabilities: Capabilities describes what the provider can express, and Ensure
//     rejects anything outside them with an *InvalidError naming the Service field
//     (e.g. "spec.sessionAffinity") before creating anything.
//
// Sub-packages:
//
//   - registry: the one list of plugins (adding a provider is one line there) and the
//     Configs type portico-controller and portico-ccm bind, validate and build providers from;
//   - reference: an in-memory provider for tests, benchmarks and demos;
//   - providertest: the conformance suite every provider passes.
//
// The AWS and bare-metal providers join as sub-packages of their own (aws, baremetal). The
// adapter that runs providers inside a stock cloud-controller-manager drives providers as the
// controllers do and lives with them (controllers/ccm).
package providers
