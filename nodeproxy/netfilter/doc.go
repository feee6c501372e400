// Package netfilter is portico-agent's netfilter programmer. Proxier is a consumer of the
// agent's sync loop: per IP family (familyProxier) it renders the changed Services (package
// serviceports, then package rules), computes the restore input (against the last applied
// ruleset on a partial sync, against the kernel's chains read with iptables-save on a full one),
// applies it in one `iptables-restore --noflush`, makes sure the jumps from the built-in chains
// exist, and deletes stale UDP conntrack entries. A failed restore leaves the family's kernel
// state unknown: its next sync is full.
//
// It owns the seams over the kernel: Netfilter (iptables-restore, iptables-save, go-iptables for
// the jumps; NewExec runs the binaries, netfiltertest fakes it for unit tests) and Conntrack
// (netlink); the netfilter metrics; where NodePorts answer (--nodeport-addresses); and Cleanup
// (--cleanup), which removes only what package rules says the agent owns. Families is the part
// of a Proxier that does not depend on how rules reach the kernel (families, FamilySynced, the
// no-local-endpoints gauge, healthCheckNodePort addresses, stale UDP conntrack): package
// nftables' Proxier uses it too.
//
// Options carry what it needs of the agent's configuration, parsed and validated at startup by
// package config (cluster CIDRs and NodePort addresses as netip.Prefix values), never the whole
// agent configuration.
package netfilter
