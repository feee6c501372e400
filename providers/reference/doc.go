// Package reference is an in-memory Provider: the executable statement of the providers
// contract, used by controller tests, the benchmark and the demo.
//
// It owns nothing outside the process. Ensure validates the desired load balancer against the
// Capabilities it was built with (returning *providers.InvalidError with the Service field path
// for anything it cannot express), allocates one address per requested IP family from its pools,
// stores a deep copy of the model and reports a Status: one ingress IP per family with IP mode
// VIP, or, with Options.Hostnames, one DNS name as a cloud load balancer would.
//
// It is a real, if in-memory, provider and a registered plugin ("reference"): the binaries that
// link the provider registry link it, so that a cluster can run Portico's controllers without
// infrastructure (the demo, the controller benchmark). It lives in its own package so that no
// other production package carries test doubles of the contract, and only a binary's provider
// wiring links it. Besides the Provider interface it exports test hooks (Calls, Desired, Refs, FailNext, SetDelay, Drift,
// Repairs) that let a test observe what the controller asked for and inject faults. Every method,
// hooks included, is safe for concurrent use.
package reference
