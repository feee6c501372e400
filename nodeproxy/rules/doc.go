// Package rules renders Services into iptables-restore input for portico-agent. It is pure: a
// Builder turns rules.ServicePort values (one Service port, one IP family, with its endpoints
// and which of them run on this node) into a Ruleset, the complete content of every chain the
// agent owns, keeping each port's rendering so a change re-renders only the changed ports;
// RestoreInput turns a Ruleset into `iptables-restore --noflush` input, in full or as the
// difference from the last applied Ruleset. The layout (address buckets, DNAT without
// per-endpoint chains, the PTC- prefix) is described in the doc of package nodeproxy.
package rules
