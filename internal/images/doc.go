// Package images builds Portico's three container images (portico-agent, portico-controller,
// portico-ccm) without Docker (internal/ociimage), for one architecture at a time (Options.Arch:
// the binaries cross-compiled, the Debian packages that architecture's), in memory (Images,
// which internal/publish pushes to a registry) or as OCI archives (Build):
// static binaries stamped with the version, portico-controller and portico-ccm as nonroot
// (65532) on a base of /etc/passwd, /etc/group and CA certificates, portico-agent as root with
// iptables (xtables-nft-multi) and conntrack from Debian's packages (apt-get download at the
// versions the mirror serves for the image's architecture, never those installed on the build
// machine; the libraries they need found along the packages' Depends; the package=version
// list in the label io.portico-lb.debian-packages) and two agent binaries: portico-agent, built
// without the BGP announcer, and portico-agent-bgp with it (AgentBGP; the chart runs it when
// agent.announce has bgp). The same source and packages give the same digests.
// A test with fake apt tools (debs_test.go) holds the rule on the versions. `make images` (e2e/tools/images), `make push` (internal/publish) and e2e/framework/install use it.
package images
