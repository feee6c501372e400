package prereq

// Source is where a program comes from.
type Source string

const (
	// Debian programs come from a Debian package: `make prereqs` installs it (apt-get, as
	// root) unless it is part of every Debian system (Base).
	Debian Source = "debian"
	// Toolchain is the Go toolchain `make` itself runs with.
	Toolchain Source = "toolchain"
	// Built programs are built by the project from its own or pinned sources (go build, make
	// tools), or installed by `make prereqs` from PyPI (moto_server): not Debian's.
	Built Source = "built"
)

// Program is one external program that Portico's binaries, tests, demo or benchmarks run.
type Program struct {
	// Name is the name the code runs it by (exec.Command, netlab's Host.Exec, ...), or the
	// base name of the path it runs.
	Name   string
	Source Source
	// Package is the Debian package that installs it (Source Debian).
	Package string
	// Base is set for a package that make prereqs lists but does not install: part of every
	// Debian system (Essential, or apt itself), or needed before make can run (make).
	Base bool
	// Privileged is set when only tests and tools that run as root use it, so that
	// PORTICO_SKIP_PRIVILEGED lets them be skipped without it.
	Privileged bool
	// Found says how the code finds it.
	Found string
	// RunBy says who runs it, for what.
	RunBy string
	// NotScanned says why TestProgramsListed cannot see the code run it by this name (run
	// outside Go, or by a path the code computes); empty when it can.
	NotScanned string
	// Path is where a Debian program is found when it is not on PATH (the CNI plugins, which
	// containerd runs from /usr/lib/cni); the package check looks there.
	Path string
}

// onPath is how most programs are found. Root's tests need /usr/sbin on PATH; Check says so.
const onPath = "by name on PATH (/usr/sbin too, for root's tests)"

// Programs is the one list of every external program Portico runs. `make prereqs` installs the
// Debian packages of those not in Base; TestProgramsListed fails when Go code runs a program
// this list does not hold, or when the list holds one nothing runs.
var Programs = []Program{
	// The Go toolchain.
	{Name: "go", Source: Toolchain, Found: "on PATH: the go that runs make",
		RunBy: "tests, demo and e2e/framework/netlab build the binaries they run (go build); api/v1alpha1's generate test (go run controller-gen)"},

	// Run by the Makefile around the Go code.
	{Name: "gofmt", Source: Toolchain, Found: "on PATH, next to go", RunBy: "make lint",
		NotScanned: "run by the Makefile"},
	{Name: "make", Source: Debian, Package: "make", Base: true, Found: "the user's (the README's first step: apt-get install -y make)",
		RunBy: "every entry point (make test, make demo, .ci/run)", NotScanned: "runs the Makefile"},
	{Name: "bash", Source: Debian, Package: "bash", Base: true, Found: "/bin/bash (the Makefile's SHELL; .ci/run's #!)",
		RunBy: "the Makefile's recipes and .ci/run", NotScanned: "run by make and by CI"},
	{Name: "grep", Source: Debian, Package: "grep", Base: true, Found: onPath,
		RunBy: "make help, and the Makefile finding the e2e-tagged packages", NotScanned: "run by the Makefile"},
	{Name: "awk", Source: Debian, Package: "mawk", Base: true, Found: onPath,
		RunBy: "make help", NotScanned: "run by the Makefile"},

	// Debian packages every Debian system has.
	{Name: "apt-get", Source: Debian, Package: "apt", Base: true, Found: onPath,
		RunBy: "make prereqs (e2e/tools/prereqs) installs the packages of this list; internal/images downloads the packages the images take files from (apt-get download) and refreshes apt's lists when they name a version the mirror dropped"},
	{Name: "apt-cache", Source: Debian, Package: "apt", Base: true, Found: onPath,
		RunBy: "make images (e2e/tools/images, internal/images) asks apt for the version the mirror serves of each Debian package an image takes files from, and for its dependencies"},
	{Name: "dpkg", Source: Debian, Package: "dpkg", Base: true, Found: onPath,
		RunBy: "make prereqs adds the architectures of ImagePlatforms apt does not know yet (dpkg --print-architecture, --print-foreign-architectures, --add-architecture)"},
	{Name: "dpkg-deb", Source: Debian, Package: "dpkg", Base: true, Found: onPath,
		RunBy: "make images (e2e/tools/images, internal/images) unpacks the Debian packages the images take files from"},
	{Name: "chroot", Source: Debian, Package: "coreutils", Base: true, Found: onPath,
		RunBy: "e2e/tools/images' test runs iptables and conntrack from the agent image's root filesystem"},
	{Name: "sh", Source: Debian, Package: "dash", Base: true, Found: onPath,
		RunBy: "e2e/framework/netlab's tests (a stray process to sweep); e2e/framework/nodes starts each node's holder, containerd and kubelet through sh -c (joining the node's cgroups first)"},
	{Name: "sleep", Source: Debian, Package: "coreutils", Base: true, Found: onPath,
		RunBy: "e2e/framework/netlab and e2e/framework/moto tests (a process to kill); e2e/framework/nodes' holder waits with sleep infinity"},
	{Name: "true", Source: Debian, Package: "coreutils", Base: true, Found: onPath,
		RunBy: "e2e/framework/cluster, e2e/framework/netlab and e2e/framework/moto tests (a process that has exited)"},

	// Debian packages make prereqs installs.
	{Name: "git", Source: Debian, Package: "git", Found: onPath,
		RunBy:      "make lint (git ls-files); go build stamps the commit",
		NotScanned: "run by the Makefile and the go command, not by Go code"},
	{Name: "ip", Source: Debian, Package: "iproute2", Privileged: true, Found: onPath,
		RunBy: "e2e/framework/netlab (ip netns exec, ip netns add), e2e/framework/router, the e2e suites, the demo, nodeproxy/rules' round trip"},
	{Name: "iptables", Source: Debian, Package: "iptables", Privileged: true,
		Found: "portico-agent: --iptables (default iptables) by name on PATH; tests: " + onPath,
		RunBy: "portico-agent's dataplane and kube-proxy's (IPv4); e2e suites set up and read rules"},
	{Name: "iptables-save", Source: Debian, Package: "iptables", Privileged: true,
		Found: "portico-agent: the sibling of --iptables; tests: " + onPath,
		RunBy: "portico-agent reads its rules; e2e suites and nodeproxy/rules' round trip"},
	{Name: "iptables-restore", Source: Debian, Package: "iptables", Privileged: true,
		Found: "portico-agent: the sibling of --iptables; tests: " + onPath,
		RunBy: "portico-agent writes its rules; the demo checks it is there"},
	{Name: "ip6tables", Source: Debian, Package: "iptables", Privileged: true,
		Found: "portico-agent: --ip6tables (default ip6tables) by name on PATH; tests: " + onPath,
		RunBy: "portico-agent's dataplane and kube-proxy's (IPv6); e2e/suites/l2election sets up DNAT"},
	{Name: "ip6tables-save", Source: Debian, Package: "iptables", Privileged: true,
		Found: "portico-agent: the sibling of --ip6tables; tests: " + onPath,
		RunBy: "portico-agent reads its rules; e2e/suites/dataplane reads them"},
	{Name: "ip6tables-restore", Source: Debian, Package: "iptables", Privileged: true,
		Found: "portico-agent: the sibling of --ip6tables", RunBy: "portico-agent writes its rules",
		NotScanned: "run as the sibling of the --ip6tables flag's value (nodeproxy/netfilter: binary + \"-restore\")"},
	{Name: "nft", Source: Debian, Package: "nftables", Privileged: true, Found: onPath,
		RunBy: "kube-proxy's nftables mode (benchmark); tests read portico-agent's nftables table (the agent itself uses netlink)"},
	{Name: "conntrack", Source: Debian, Package: "conntrack", Privileged: true, Found: onPath,
		RunBy:      "a person reading a lab's connection tracking (the agent itself uses netlink)",
		NotScanned: "run by hand when debugging a lab, not by Go code"},
	{Name: "bird", Source: Debian, Package: "bird2", Privileged: true, Found: onPath,
		RunBy: "the BGP router in e2e/framework/router (e2e/suites/bgp, nodeproxy/announce/bgp's lab, the demo)"},
	{Name: "birdc", Source: Debian, Package: "bird2", Privileged: true, Found: onPath,
		RunBy: "e2e/framework/router reads bird's routes, sessions and BFD state"},
	// iputils-arping, not arping (Thomas Habets'): both accept -c -w -I (checked in a netns);
	// iputils' is Debian's standard one and installs to /usr/bin, on every user's PATH.
	{Name: "arping", Source: Debian, Package: "iputils-arping", Privileged: true, Found: onPath,
		RunBy: "e2e/suites/l2 and e2e/suites/l2election ask who answers ARP for a VIP (arping -c N -w N -I eth0)"},
	{Name: "sysctl", Source: Debian, Package: "procps", Privileged: true, Found: onPath,
		RunBy: "e2e/framework/router, e2e/suites/bgp, nodeproxy/announce/bgp's lab and the demo set the router's forwarding and ECMP hash"},
	{Name: "python3", Source: Debian, Package: "python3-venv",
		Found: "MotoPython: /usr/bin/python3, else python3 on PATH, that can import venv and ensurepip",
		RunBy: "make prereqs creates moto's virtual environment; e2e/framework/moto asks the venv's python for moto's version"},

	// The clusters of real kubelets (e2e/framework/nodes, e2e/suites/nodes).
	{Name: "containerd", Source: Debian, Package: "containerd", Privileged: true, Found: onPath,
		RunBy:      "e2e/framework/nodes: each node's container runtime, entered into the node's namespaces by nsenter",
		NotScanned: "run by nsenter, an argument of sh -c (e2e/framework/nodes' startInCgroup)"},
	{Name: "ctr", Source: Debian, Package: "containerd", Privileged: true, Found: onPath,
		RunBy: "e2e/framework/nodes imports the image archives into each node's containerd (ctr images import)"},
	{Name: "runc", Source: Debian, Package: "runc", Privileged: true, Found: "by containerd's runc shim, on PATH",
		RunBy: "containerd runs every container with it", NotScanned: "run by containerd, not by Go code"},
	{Name: "ptp", Source: Debian, Package: "containernetworking-plugins", Privileged: true, Path: "/usr/lib/cni/ptp",
		Found: "by containerd in /usr/lib/cni (its CNI bin_dir)", RunBy: "containerd wires each pod to its node (a veth, a /32 route)",
		NotScanned: "run by containerd, not by Go code"},
	{Name: "host-local", Source: Debian, Package: "containernetworking-plugins", Privileged: true, Path: "/usr/lib/cni/host-local",
		Found: "by containerd in /usr/lib/cni (its CNI bin_dir)", RunBy: "the ptp plugin takes pod IPs from the node's pod CIDR with it",
		NotScanned: "run by containerd, not by Go code"},
	{Name: "portmap", Source: Debian, Package: "containernetworking-plugins", Privileged: true, Path: "/usr/lib/cni/portmap",
		Found: "by containerd in /usr/lib/cni (its CNI bin_dir)", RunBy: "containerd maps hostPorts with it",
		NotScanned: "run by containerd, not by Go code"},
	{Name: "nsenter", Source: Debian, Package: "util-linux", Base: true, Found: onPath,
		RunBy: "e2e/framework/nodes enters containerd and kubelet into a node's network, mount and UTS namespaces (an argument of sh -c); e2e/suites/migration runs kube-proxy and MetalLB's speaker in a node's network namespace"},
	{Name: "setpriv", Source: Debian, Package: "util-linux", Base: true, Found: onPath,
		RunBy: "e2e/suites/announceonly runs announce-only agents without CAP_NET_ADMIN (--bounding-set -net_admin)"},
	{Name: "unshare", Source: Debian, Package: "util-linux", Base: true, Found: onPath,
		RunBy:      "e2e/framework/nodes makes each node's mount and UTS namespaces (the holder process)",
		NotScanned: "an argument of sh -c (e2e/framework/nodes' startInCgroup)"},
	{Name: "mount", Source: Debian, Package: "mount", Base: true, Found: onPath,
		RunBy:      "e2e/framework/nodes' holder mounts the node's directories over /var/lib, /var/log and /run",
		NotScanned: "run by a shell script (e2e/framework/nodes' holderScript)"},
	{Name: "umount", Source: Debian, Package: "mount", Base: true, Found: onPath,
		RunBy:      "e2e/framework/nodes' holder drops its copies of the machine's /run/netns mounts",
		NotScanned: "run by a shell script (e2e/framework/nodes' holderScript)"},
	{Name: "hostname", Source: Debian, Package: "hostname", Base: true, Found: onPath,
		RunBy:      "e2e/framework/nodes' holder sets the node's hostname in its UTS namespace",
		NotScanned: "run by a shell script (e2e/framework/nodes' holderScript)"},
	{Name: "kubelet", Source: Built, Found: "make tools (e2e/framework/k8sbin) builds it into <cache>/bin",
		RunBy: "e2e/framework/nodes: each node's kubelet", NotScanned: "run by the path e2e/framework/k8sbin returns, through nsenter"},
	{Name: "kube-scheduler", Source: Built, Found: "make tools (e2e/framework/k8sbin) builds it into <cache>/bin",
		RunBy: "e2e/framework/cluster's control plane (Options.Scheduler, for e2e/framework/nodes)", NotScanned: "run by the path e2e/framework/k8sbin returns"},
	{Name: "pause", Source: Built, Found: "e2e/framework/nodes builds e2e/tools/pause statically into its pause image",
		RunBy: "containerd: every pod's sandbox process on the kubelet nodes", NotScanned: "run by containerd inside a container"},

	// The upstream e2e specs (e2e/framework/conformance, make conformance): images made from
	// Debian's packages at the versions the mirror serves (internal/images), and the built test
	// programs.
	{Name: "nc.openbsd", Source: Debian, Package: "netcat-openbsd", Privileged: true, Found: "taken into the agnhost image from its package at the version the mirror serves (internal/images); the tests do not run it on this machine",
		RunBy: "the upstream e2e specs, inside agnhost pods (as nc)", NotScanned: "run inside a container by the upstream specs"},
	{Name: "curl", Source: Debian, Package: "curl", Privileged: true, Found: "taken into the agnhost image from its package at the version the mirror serves (internal/images); the tests do not run it on this machine",
		RunBy: "the upstream e2e specs, inside agnhost pods", NotScanned: "run inside a container by the upstream specs"},
	{Name: "wget", Source: Debian, Package: "wget", Privileged: true, Found: "taken into the agnhost image from its package at the version the mirror serves (internal/images); the tests do not run it on this machine",
		RunBy: "the upstream e2e specs, inside agnhost pods", NotScanned: "run inside a container by the upstream specs"},
	{Name: "ginkgo", Source: Built, Found: "e2e/framework/conformance builds github.com/onsi/ginkgo/v2/ginkgo (the version k8s.io/kubernetes requires) into <cache>/bin/e2e-<version>",
		RunBy: "e2e/framework/conformance runs the upstream specs with it in the tester's namespace", NotScanned: "an argument of ip netns exec"},
	{Name: "e2e.test", Source: Built, Found: "e2e/framework/conformance builds k8s.io/kubernetes/test/e2e (go test -c) into <cache>/bin/e2e-<version>",
		RunBy: "ginkgo runs it on parallel processes", NotScanned: "run by ginkgo"},
	{Name: "kubectl", Source: Built, Found: "e2e/framework/conformance builds it into <cache>/bin/e2e-<version>",
		RunBy: "e2e.test execs into pods with it (--kubectl-path)", NotScanned: "run by e2e.test"},
	{Name: "agnhost", Source: Built, Found: "e2e/framework/conformance builds k8s.io/kubernetes/test/images/agnhost into its agnhost image",
		RunBy: "containerd: the upstream specs' pods", NotScanned: "run by containerd inside a container"},

	// Built by the project, or installed by make prereqs from PyPI.
	{Name: "moto_server", Source: Built, Found: "MotoServerPath: $PORTICO_MOTO_SERVER, else <cache>/moto-<version>/bin/moto_server",
		RunBy:      "e2e/framework/moto, providers/aws's moto tests, the AWS demo: the AWS emulator (pip-installed by make prereqs)",
		NotScanned: "run by the path MotoServerPath computes"},
	{Name: "etcd", Source: Built, Found: "make tools (e2e/framework/k8sbin) builds it into <cache>/bin",
		RunBy: "e2e/framework/cluster's control plane", NotScanned: "run by the path e2e/framework/k8sbin returns"},
	{Name: "kube-apiserver", Source: Built, Found: "make tools (e2e/framework/k8sbin) builds it into <cache>/bin",
		RunBy: "e2e/framework/cluster's control plane", NotScanned: "run by the path e2e/framework/k8sbin returns"},
	{Name: "kube-controller-manager", Source: Built, Found: "make tools (e2e/framework/k8sbin) builds it into <cache>/bin",
		RunBy: "e2e/framework/cluster's control plane (EndpointSlice controllers)", NotScanned: "run by the path e2e/framework/k8sbin returns"},
	{Name: "kube-proxy", Source: Built, Found: "make tools (e2e/framework/k8sbin) builds it into <cache>/bin",
		RunBy: "e2e/suites/dataplane's comparison with kube-proxy; e2e/suites/migration's MetalLB cluster (in each node's network namespace)", NotScanned: "run by the path e2e/framework/k8sbin returns"},
	{Name: "aws-cloud-controller-manager", Source: Built, Found: "e2e/framework/cpaws builds k8s.io/cloud-provider-aws v1.36.2 from the Go module proxy into <cache>/bin",
		RunBy: "e2e/suites/aws's parity test: cloud-provider-aws as the anchor, on the same Services as Portico", NotScanned: "run by the path e2e/framework/cpaws returns"},
	{Name: "metallb-controller", Source: Built, Found: "e2e/framework/metallb builds go.universe.tf/metallb v0.16.1's controller from the Go module proxy into <cache>/bin",
		RunBy: "e2e/suites/migration: the real MetalLB allocates before the switch to portico-controller", NotScanned: "run by the path e2e/framework/metallb returns"},
	{Name: "metallb-speaker", Source: Built, Found: "e2e/framework/metallb builds go.universe.tf/metallb v0.16.1's speaker from the Go module proxy into <cache>/bin",
		RunBy: "e2e/suites/migration: the real MetalLB announces (ARP) in each kubelet node's network namespace before the switch", NotScanned: "run by the path e2e/framework/metallb returns, through nsenter"},
	{Name: "portico-agent", Source: Built, Found: "go build ./cmd/portico-agent by the suite or the demo",
		RunBy: "e2e suites and the demo"},
	{Name: "portico-controller", Source: Built, Found: "go build ./cmd/portico-controller by the suite or the demo",
		RunBy: "e2e suites and the demo"},
	{Name: "portico-ccm", Source: Built, Found: "go build ./cmd/portico-ccm by the suite",
		RunBy: "e2e/suites/ccm and e2e/suites/aws"},
	{Name: "echoserver", Source: Built, Found: "e2e/framework/netlab builds e2e/tools/echoserver into <cache>/echoserver-<hash>",
		RunBy: "backends in the network labs"},
	{Name: "bgpspeaker", Source: Built, Found: "e2e/framework/gobuild builds e2e/tools/bgpspeaker into <cache>, once per source version",
		RunBy: "nodeproxy/announce/bgp's lab: the speaker in each node namespace", NotScanned: "run by a path held in a variable"},
	{Name: "l2node", Source: Built, Found: "e2e/framework/gobuild builds e2e/tools/l2node into <cache>, once per source version",
		RunBy: "e2e/suites/l2election: the announcer in each node namespace", NotScanned: "run by a path held in a struct field"},
	{Name: "demo", Source: Built, Found: "e2e/framework/gobuild builds e2e/tools/demo into <cache>, once per source version",
		RunBy: "e2e/tools/demo's test runs the AWS demo end to end", NotScanned: "run by the path e2e/framework/gobuild returns"},
}

// FindProgram returns the entry of Programs named name.
func FindProgram(name string) (Program, bool) {
	for _, p := range Programs {
		if p.Name == name {
			return p, true
		}
	}
	return Program{}, false
}

// debianPackage is the Package of Programs' Debian package name: its commands are those of
// its programs found on PATH (python3-venv has none: MotoPython checks it), privileged when
// every one of them is.
func debianPackage(name string) Package {
	p := Package{Name: name, Privileged: true}
	for _, prog := range Programs {
		if prog.Source != Debian || prog.Package != name {
			continue
		}
		p.Privileged = p.Privileged && prog.Privileged
		switch {
		case prog.Path != "":
			p.Commands = append(p.Commands, prog.Path)
		case prog.Name != "python3":
			p.Commands = append(p.Commands, prog.Name)
		}
	}
	if len(p.Commands) == 0 {
		p.Privileged = false
	}
	return p
}

// installed returns the Debian packages of Programs that make prereqs installs, in the order
// of Programs.
func installed() []Package {
	var pkgs []Package
	seen := map[string]bool{}
	for _, prog := range Programs {
		if prog.Source == Debian && !prog.Base && !seen[prog.Package] {
			seen[prog.Package] = true
			pkgs = append(pkgs, debianPackage(prog.Package))
		}
	}
	return pkgs
}
