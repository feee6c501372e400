// Package images builds Portico's three container images (portico-agent, portico-controller,
// portico-ccm) as OCI archives without Docker and without a registry (internal/ociimage):
// static binaries stamped with the version, portico-controller and portico-ccm as nonroot
// (65532) on a base of /etc/passwd, /etc/group and CA certificates, portico-agent as root with
// iptables (xtables-nft-multi) and conntrack from Debian's packages (apt-get download at the
// installed versions, with their libraries) and two agent binaries: portico-agent, built
// without the BGP announcer, and portico-agent-bgp with it (AgentBGP; the chart runs it when
// agent.announce has bgp). The same source and packages give the same digests. `make images` (e2e/tools/images) and e2e/framework/install use it.
package images
