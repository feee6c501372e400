// Package config holds one configuration struct per binary (Agent, Controller, CCM): its
// defaults, BindFlags (spf13/pflag) and Validate, which reports every problem at once so a bad
// flag is a clear startup error, never a half-working process. Agent and Controller also have
// Complete, which loads an optional --config file under the flags (the agent's versioned
// AgentConfiguration, the controller's YAML); CCM is read from the stock --cloud-config file by
// LoadCCM. Values arrive parsed: addresses are netip types from the moment the flag is read.
//
// CLI is the command line the binaries share: pflag, --version (internal/version), and klog's
// flags from k8s.io/component-base/logs (--logging-format=text|json, -v, --vmodule).
//
// config is a leaf: it imports no Portico package but internal/version. The providers a
// Controller or CCM configures come in as a type parameter (ProviderConfigs), which each
// binary's cmd wires to providers/registry; internal/deprules checks the rule.
package config
