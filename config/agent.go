package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
)

// Agent is the configuration of portico-agent, the per-node dataplane. Flags that do what
// kube-proxy's do carry kube-proxy's names. Addresses arrive parsed: a bad CIDR is a flag error
// at startup, never a value dropped later.
type Agent struct {
	// Kubeconfig path; empty means in-cluster or $KUBECONFIG. RESTConfig refuses the
	// kubernetes Service's ClusterIP as the API server's address (ErrOwnClusterIP).
	Kubeconfig string
	// Master is the API server's address, overriding the kubeconfig's.
	Master string
	// NodeName is this node's Node object; defaults to the hostname.
	NodeName string
	// ProxyMode is the dataplane: ProxyModeNFTables (the default) or ProxyModeIPTables, or
	// ProxyModeNone for none: the agent only announces, beside another service proxy.
	ProxyMode string
	// IgnoreOtherProxy starts the dataplane even where another service proxy's rules are
	// found (OtherProxy): for the overlap of a switch from kube-proxy, or leftovers known to be
	// stale. Without it the agent refuses to start there.
	IgnoreOtherProxy bool
	// SyncPeriod is how often the agent rewrites every chain it owns (a full sync), repairing
	// whatever someone else changed or deleted.
	SyncPeriod time.Duration
	// MinSyncPeriod is the shortest time between two syncs: changes arriving faster are batched.
	MinSyncPeriod time.Duration
	// HealthzBindAddress serves /healthz and /livez ("0" or "" disables).
	HealthzBindAddress string
	// MetricsBindAddress serves /metrics ("0" or "" disables).
	MetricsBindAddress string
	// Cleanup removes everything the agent installed and exits.
	Cleanup bool
	// NodePortAddresses restricts NodePorts to some node addresses (see NodePortAddresses).
	NodePortAddresses NodePortAddresses
	// ClusterCIDRs hold the pods' addresses: traffic from outside them to a ClusterIP is
	// masqueraded, traffic from inside them to an externalTrafficPolicy: Local address is sent
	// to any endpoint. Empty disables both.
	ClusterCIDRs []netip.Prefix
	// MasqueradeAll masquerades all ClusterIP traffic.
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit (0-31) that asks for masquerading.
	MasqueradeBit int
	// IPTablesPath and IP6TablesPath name the iptables binaries (the -restore and -save
	// variants are found next to them by suffix).
	IPTablesPath, IP6TablesPath string
	// Announcers names the VIP announcers to run (see KnownAnnouncers); empty: none.
	Announcers []string
	// AnnounceClasses are the loadBalancerClasses whose Services' VIPs the announcers announce:
	// those a Portico bare-metal provider serves (portico-controller's --class values with
	// the baremetal provider). A VIP that only Services of other classes hold is never
	// announced, whatever their status says.
	AnnounceClasses []string
	// AnnounceClassless announces the VIPs of class-less Services too (the default): set it
	// false unless portico-ccm or portico-controller's classless provider is baremetal.
	AnnounceClassless bool
	// IgnoreExcludeLB makes nodes labelled node.kubernetes.io/exclude-from-external-load-balancers
	// announce and count as load-balancer nodes like any other (servicerules.IgnoreExcludeLabel);
	// give it to portico-controller too, so both agree.
	IgnoreExcludeLB bool
	// Membership configures the node-liveness gossip every announcer and the dead-node
	// endpoint filter rely on.
	Membership Membership
	// BGPGracefulRestart, when not zero, is the BGP graceful restart time (RFC 4724) the bgp
	// announcer offers every peer: when the agent stops on a node that stays (not cordoned,
	// excluded or being deleted) it closes its sessions without withdrawing, and routers that
	// help keep the node's routes that long for the next agent. Zero: withdraw at every stop.
	BGPGracefulRestart time.Duration
	// DaemonSet, "namespace/name", is the DaemonSet that runs the agent. The agent watches it
	// while it runs and, stopped by a signal, reads it: when it is gone or being deleted (as
	// read, or as last watched when the read fails), the agent is being uninstalled, not
	// restarted; any other answer (Forbidden, Unauthorized, a timeout) is a restart. It
	// then withdraws every announcement (BGP despite graceful restart), leaves membership
	// without a restart hold and, with UninstallCleanup, removes its rules as Cleanup does.
	// Empty: never checked, every stop is a restart (the rules stay).
	DaemonSet string
	// UninstallCleanup removes the rules (both modes, as Cleanup) when DaemonSet shows an
	// uninstall; false keeps them, e.g. until another service proxy has taken over.
	UninstallCleanup bool
	// ExternalIPs says which Services' spec.externalIPs the agent programs (ExternalIPPolicy).
	ExternalIPs ExternalIPPolicy
	// ConfigFile is the AgentConfiguration file (--config) Complete loads; empty: flags only.
	ConfigFile string
}

// ExternalIPPolicy says which addresses of the Services' spec.externalIPs the agent programs.
// Whoever may create a Service may write any address there, and every node that programs it
// sends that address's traffic to the Service's endpoints: another Service's VIP:port or a
// host outside the cluster included (CVE-2020-8554). kube-proxy programs them all; clusters
// close the hole with the DenyServiceExternalIPs admission plugin or an allow-list webhook. The
// agent can refuse them itself: a refused address gets no rule, so its packets are not
// DNATed, and the Service gets a Warning Event (package nodeproxy).
type ExternalIPPolicy struct {
	// Policy is ExternalIPsAllow (every address, as kube-proxy: the default), ExternalIPsDeny
	// (none) or ExternalIPsCIDRs (only those within AllowedCIDRs).
	Policy string
	// AllowedCIDRs are the addresses ExternalIPsCIDRs programs; set only with that policy.
	AllowedCIDRs []netip.Prefix
}

// The --external-ip-policy values.
const (
	ExternalIPsAllow = "allow"
	ExternalIPsDeny  = "deny"
	ExternalIPsCIDRs = "cidrs"
)

// ExternalIPPolicies are the accepted --external-ip-policy values.
var ExternalIPPolicies = []string{ExternalIPsAllow, ExternalIPsDeny, ExternalIPsCIDRs}

// NodePortAddresses restricts NodePorts to node addresses within CIDRs, plus the node's primary
// IP of each family when Primary is set (written "primary", as kube-proxy). A family with
// neither keeps the default: every local address except loopback.
type NodePortAddresses struct {
	CIDRs   []netip.Prefix
	Primary bool
}

// NodePortPrimary in --nodeport-addresses stands for the Node's primary IP of each family.
const NodePortPrimary = "primary"

// The --proxy-mode values: iptables (package nodeproxy/netfilter) or nftables (package
// nodeproxy/nftables, over netlink); none programs no Service and serves no
// healthCheckNodePort: the agent runs its announcers (and what they need: membership, the
// endpoints of externalTrafficPolicy: Local) beside the node's service proxy (kube-proxy in
// either mode, or another), which does both.
const (
	ProxyModeIPTables = "iptables"
	ProxyModeNFTables = "nftables"
	ProxyModeNone     = "none"
)

// ProxyModes are the accepted --proxy-mode values.
var ProxyModes = []string{ProxyModeIPTables, ProxyModeNFTables, ProxyModeNone}

// The agent's /healthz and /metrics addresses: kube-proxy's with a dataplane (the agent
// replaces it), others with --proxy-mode=none, where kube-proxy runs beside the agent and
// holds its own.
const (
	DefaultHealthzBindAddress      = "0.0.0.0:10256"
	DefaultMetricsBindAddress      = "127.0.0.1:10249"
	AnnounceOnlyHealthzBindAddress = "0.0.0.0:10266"
	AnnounceOnlyMetricsBindAddress = "127.0.0.1:10269"
)

// AnnouncerL2 answers ARP/NDP for the VIPs of AddressPools with spec.announce.l2.
const AnnouncerL2 = "l2"

// AnnouncerBGP advertises the VIPs of AddressPools with spec.announce.bgp to the BGPPeers that
// select the node.
const AnnouncerBGP = "bgp"

// KnownAnnouncers are the values --announce accepts, and whether each needs membership.
var KnownAnnouncers = map[string]bool{AnnouncerL2: true, AnnouncerBGP: false}

// Membership is the configuration of the agents' membership (package nodeproxy/membership,
// hashicorp/memberlist): which nodes' agents are alive, known within a second.
type Membership struct {
	// Enabled runs membership. Required by the l2 announcer. Without it no endpoint is
	// treated as dead.
	Enabled bool
	// BindAddress is the node IP to listen on and advertise; empty: the Node's first
	// InternalIP.
	BindAddress string
	// Port is the TCP and UDP port of every agent.
	Port int
	// SecretFile holds the shared secret that encrypts the gossip (its SHA-256 is the key),
	// read once at start: no rotation. Empty: see Secret; both empty: unencrypted.
	SecretFile string
	// Secret, "namespace/name", is the Secret that holds the gossip keys: data key "secret"
	// is the one the agent sends with, every data key starting "secret-" is also accepted
	// (a rotation; package nodeproxy/membership's doc). The agent reads it at start and
	// watches it: a change of its keys takes effect at once, without a restart.
	Secret string
	// CreateSecret lets the agent create Secret with a random key when it is missing (one
	// conflict-safe create: when several agents race, all of them use the winner's key).
	CreateSecret bool
	// The failure detector's timings (package nodeproxy/membership explains the arithmetic).
	ProbeInterval, ProbeTimeout, GossipInterval, RejoinInterval time.Duration
	SuspicionMult, SuspicionMaxTimeoutMult                      int
	// RestartHold is how long the other agents keep this node as the owner of its VIPs (and
	// its endpoints in their rules) after it stopped on SIGTERM, waiting for its agent to come
	// back (an upgrade or a restart of the pod): at exit the agent tells them so instead of
	// leaving. 0: leave at exit, the others fail over at once. A crash or a lost node is found
	// by the failure detector as before, whatever this is.
	RestartHold time.Duration
}

// MaxRestartHold bounds RestartHold: a VIP whose node does not come back is unanswered for
// up to the hold.
const MaxRestartHold = 5 * time.Minute

// DefaultMembershipPort is memberlist's usual port (TCP and UDP), as MetalLB uses it.
const DefaultMembershipPort = 7946

// DefaultMembership returns membership's defaults (disabled): timings tuned for sub-second
// detection on one LAN. Package nodeproxy/membership takes its defaults from here.
func DefaultMembership() Membership {
	return Membership{
		Port:                    DefaultMembershipPort,
		ProbeInterval:           100 * time.Millisecond,
		ProbeTimeout:            50 * time.Millisecond,
		GossipInterval:          50 * time.Millisecond,
		RejoinInterval:          5 * time.Second,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 2,
		RestartHold:             DefaultRestartHold,
	}
}

// DefaultRestartHold is the default RestartHold: several times the few seconds a DaemonSet
// takes to replace an agent pod (measured in e2e/suites/install), short enough that a node
// that stops for good loses its VIPs to another node within it.
const DefaultRestartHold = 15 * time.Second

// DefaultAgent returns the defaults.
func DefaultAgent() Agent {
	host, _ := os.Hostname()
	return Agent{
		NodeName:           strings.ToLower(host),
		ProxyMode:          ProxyModeNFTables,
		SyncPeriod:         30 * time.Second,
		MinSyncPeriod:      1 * time.Second,
		HealthzBindAddress: DefaultHealthzBindAddress,
		MetricsBindAddress: DefaultMetricsBindAddress,
		MasqueradeBit:      12,
		IPTablesPath:       "iptables",
		IP6TablesPath:      "ip6tables",
		Membership:         DefaultMembership(),
		BGPGracefulRestart: DefaultBGPGracefulRestart,
		UninstallCleanup:   true,
		AnnounceClassless:  true,
		ExternalIPs:        ExternalIPPolicy{Policy: ExternalIPsAllow},
	}
}

// DefaultBGPGracefulRestart is --bgp-graceful-restart's default: long enough for a DaemonSet to
// replace an agent's pod with an image already on the node, short enough that a node that
// never comes back does not keep its routes for long (BFD or a cordon end them sooner).
const DefaultBGPGracefulRestart = 30 * time.Second

// maxBGPGracefulRestart is the longest restart time BGP's capability holds (12 bits of seconds).
const maxBGPGracefulRestart = 4095 * time.Second

// BindFlags registers the agent's flags on fs. Names portico-agent used before it took
// kube-proxy's stay as deprecated aliases. What they are given is recorded for Complete.
func (c *Agent) BindFlags(fs *pflag.FlagSet) {
	recordGiven(fs, func() { c.bindFlags(fs) })
}

func (c *Agent) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "AgentConfiguration file (apiVersion "+AgentConfigurationAPIVersion+"); flags given on the command line override it")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "path to a kubeconfig; empty means $KUBECONFIG or in-cluster (refused at the kubernetes Service's ClusterIP, which the agent programs: give --master)")
	fs.StringVar(&c.Master, "master", c.Master, "address of the API server (overrides the kubeconfig's); its own address, never the kubernetes Service's ClusterIP")
	fs.StringVar(&c.NodeName, "hostname-override", c.NodeName, "name of this node's Node object (default: the hostname)")
	fs.StringVar(&c.ProxyMode, "proxy-mode", c.ProxyMode, `dataplane: "iptables" or "nftables"; "none" programs no Service and serves no healthCheckNodePort, only announces (--announce), beside kube-proxy or another service proxy`)
	fs.BoolVar(&c.IgnoreOtherProxy, "ignore-other-proxy", c.IgnoreOtherProxy, "start the dataplane (iptables or nftables) even where another service proxy's rules are found (kube-proxy's nftables tables or iptables KUBE-SERVICES chain): for the overlap of a switch from kube-proxy, or its leftovers known to be stale; without it the agent refuses to start there")
	fs.DurationVar(&c.SyncPeriod, "iptables-sync-period", c.SyncPeriod, "how often every owned chain is rewritten, repairing drift (> 0)")
	fs.DurationVar(&c.MinSyncPeriod, "iptables-min-sync-period", c.MinSyncPeriod, "shortest time between syncs; faster changes are batched (0: sync every change at once)")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "address of /healthz and /livez (0 disables; with --proxy-mode=none the default is "+AnnounceOnlyHealthzBindAddress+", kube-proxy keeping its own)")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address of /metrics (0 disables; with --proxy-mode=none the default is "+AnnounceOnlyMetricsBindAddress+")")
	fs.BoolVar(&c.Cleanup, "cleanup", c.Cleanup, "remove every chain and rule the agent installed, then exit")
	fs.Var(&nodePortFlag{&c.NodePortAddresses}, "nodeport-addresses", `comma list of CIDRs and/or "primary" (the Node's primary IP per family): NodePorts answer only on local addresses within them (default: every local address except loopback)`)
	fs.Var(&prefixListFlag{&c.ClusterCIDRs}, "cluster-cidr", "comma list of the pods' CIDRs (enables masquerading of off-cluster ClusterIP traffic and the externalTrafficPolicy: Local short-circuit)")
	fs.BoolVar(&c.MasqueradeAll, "masquerade-all", c.MasqueradeAll, "masquerade all traffic sent to ClusterIPs")
	fs.BoolVar(&c.IgnoreExcludeLB, "ignore-exclude-lb", c.IgnoreExcludeLB, "treat nodes labelled node.kubernetes.io/exclude-from-external-load-balancers as load-balancer nodes like any other (announcers; give portico-controller the same flag)")
	fs.IntVar(&c.MasqueradeBit, "iptables-masquerade-bit", c.MasqueradeBit, "fwmark bit (0-31) marking packets to masquerade")
	fs.StringVar(&c.IPTablesPath, "iptables", c.IPTablesPath, "iptables binary; iptables-restore and iptables-save are its siblings")
	fs.StringVar(&c.IP6TablesPath, "ip6tables", c.IP6TablesPath, "ip6tables binary")
	fs.Func("announce", `comma list of VIP announcers to run: "l2" (ARP/NDP for AddressPools with spec.announce.l2; needs --membership), "bgp" (routes for AddressPools with spec.announce.bgp to the BGPPeers selecting this node)`, func(s string) error {
		c.Announcers = splitList(s)
		return nil
	})
	fs.Var(&stringListFlag{&c.AnnounceClasses}, "announce-classes", "comma list of the loadBalancerClasses whose Services' VIPs the announcers announce: those Portico's bare-metal provider serves (portico-controller's --class values with baremetal); VIPs held only by Services of other classes are never announced")
	fs.BoolVar(&c.AnnounceClassless, "announce-classless", c.AnnounceClassless, "announce the VIPs of Services without a loadBalancerClass (false unless portico-ccm or portico-controller's --classless-provider is baremetal)")
	fs.DurationVar(&c.BGPGracefulRestart, "bgp-graceful-restart", c.BGPGracefulRestart, "BGP graceful restart time offered to every peer (whole seconds up to 4095s): an agent stopping on a node that stays keeps its routes at the routers that long for the next agent; 0 withdraws them at every stop")
	fs.StringVar(&c.DaemonSet, "daemonset", c.DaemonSet, `"namespace/name" of the agent's DaemonSet: an agent stopped by a signal while that DaemonSet is gone or being deleted (an uninstall; as read at exit, or as watched while it ran when that read fails) withdraws its announcements, leaves membership and removes its rules (see --uninstall-cleanup); empty: never checked, the rules stay at every stop`)
	fs.BoolVar(&c.UninstallCleanup, "uninstall-cleanup", c.UninstallCleanup, "with --daemonset: remove every chain and table the agent installed (as --cleanup) when it stops for an uninstall; false keeps the rules")
	fs.Var(&choiceFlag{p: &c.ExternalIPs.Policy, choices: ExternalIPPolicies}, "external-ip-policy", `which Services' spec.externalIPs the agent programs: "allow" (all, as kube-proxy), "deny" (none) or "cidrs" (those within --external-ip-allowed-cidrs); a Service whose addresses are refused gets a Warning Event ExternalIPsRefused`)
	fs.Var(&prefixListFlag{&c.ExternalIPs.AllowedCIDRs}, "external-ip-allowed-cidrs", "comma list of CIDRs: with --external-ip-policy=cidrs, the externalIPs the agent programs")
	m := &c.Membership
	fs.BoolVar(&m.Enabled, "membership", m.Enabled, "run the agents' membership (memberlist): node liveness for announcers and for leaving out endpoints on dead nodes")
	fs.StringVar(&m.BindAddress, "membership-bind-address", m.BindAddress, "node IP membership listens on and advertises (default: the Node's first InternalIP)")
	fs.IntVar(&m.Port, "membership-port", m.Port, "membership TCP and UDP port, the same on every node")
	fs.StringVar(&m.SecretFile, "membership-secret-file", m.SecretFile, "file holding the shared secret that encrypts membership traffic, read once at start (default: --membership-secret, else unencrypted)")
	fs.StringVar(&m.Secret, "membership-secret", m.Secret, `"namespace/name" of the Secret holding the keys that encrypt membership traffic, read at start and watched: data key "secret" is sent with, keys named "secret-*" are accepted too (a rotation)`)
	fs.BoolVar(&m.CreateSecret, "membership-create-secret", m.CreateSecret, "create --membership-secret with a random key when it is missing (a conflict-safe create: racing agents all take the winner's key)")
	fs.DurationVar(&m.ProbeInterval, "membership-probe-interval", m.ProbeInterval, "how often each agent probes another")
	fs.DurationVar(&m.ProbeTimeout, "membership-probe-timeout", m.ProbeTimeout, "how long a probe waits for its ack (less than the interval)")
	fs.IntVar(&m.SuspicionMult, "membership-suspicion-mult", m.SuspicionMult, "probe intervals (times max(1, log10(nodes))) a suspected node has to refute before it is declared dead")
	fs.IntVar(&m.SuspicionMaxTimeoutMult, "membership-suspicion-max-timeout-mult", m.SuspicionMaxTimeoutMult, "upper bound of the suspicion timeout, as a multiple of its minimum")
	fs.DurationVar(&m.GossipInterval, "membership-gossip-interval", m.GossipInterval, "how often membership news is gossiped")
	fs.DurationVar(&m.RejoinInterval, "membership-rejoin-interval", m.RejoinInterval, "how often nodes missing from the view are joined again")
	fs.DurationVar(&m.RestartHold, "membership-restart-hold", m.RestartHold, "on SIGTERM, ask the other agents to keep this node's VIPs and endpoints for this long while the agent restarts, instead of leaving (0: leave, the others fail over at once; a crash fails over at once anyway)")

	// Portico's first names, before it took kube-proxy's.
	deprecatedAlias(fs, "node-name", "hostname-override")
	deprecatedAlias(fs, "sync-period", "iptables-sync-period")
	deprecatedAlias(fs, "min-sync-period", "iptables-min-sync-period")
	deprecatedAlias(fs, "masquerade-bit", "iptables-masquerade-bit")
	// Its first name, when only the bgp announcer read it.
	deprecatedAlias(fs, "bgp-daemonset", "daemonset")
}

// deprecatedAlias registers old as a deprecated second name of the flag named current.
func deprecatedAlias(fs *pflag.FlagSet, old, current string) {
	f := fs.Lookup(current)
	fs.Var(f.Value, old, "deprecated: use --"+current)
	_ = fs.MarkDeprecated(old, "use --"+current)
}

// stringListFlag parses a comma list of strings; String gives the same list back.
type stringListFlag struct{ p *[]string }

func (f *stringListFlag) String() string     { return strings.Join(*f.p, ",") }
func (f *stringListFlag) Type() string       { return "strings" }
func (f *stringListFlag) Set(s string) error { *f.p = splitList(s); return nil }

// choiceFlag is a string flag that takes one of choices: anything else is an error naming the
// flag at startup.
type choiceFlag struct {
	p       *string
	choices []string
}

func (f *choiceFlag) String() string { return *f.p }
func (f *choiceFlag) Type() string   { return "string" }
func (f *choiceFlag) Set(s string) error {
	if !slices.Contains(f.choices, s) {
		return fmt.Errorf("must be one of %s", strings.Join(f.choices, ", "))
	}
	*f.p = s
	return nil
}

// prefixListFlag parses a comma list of CIDRs (masked) into a []netip.Prefix.
type prefixListFlag struct{ p *[]netip.Prefix }

func (f *prefixListFlag) String() string { return joinPrefixes(*f.p) }
func (f *prefixListFlag) Type() string   { return "cidrs" }
func (f *prefixListFlag) Set(s string) error {
	var out []netip.Prefix
	for _, item := range splitList(s) {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR", item)
		}
		out = append(out, p.Masked())
	}
	*f.p = out
	return nil
}

// nodePortFlag parses --nodeport-addresses: CIDRs and the keyword "primary".
type nodePortFlag struct{ n *NodePortAddresses }

func (f *nodePortFlag) String() string {
	s := joinPrefixes(f.n.CIDRs)
	if f.n.Primary {
		s = strings.TrimPrefix(s+","+NodePortPrimary, ",")
	}
	return s
}
func (f *nodePortFlag) Type() string { return "cidrs" }
func (f *nodePortFlag) Set(s string) error {
	var out NodePortAddresses
	for _, item := range splitList(s) {
		if item == NodePortPrimary {
			out.Primary = true
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return fmt.Errorf("%q is neither a CIDR nor %q", item, NodePortPrimary)
		}
		out.CIDRs = append(out.CIDRs, p.Masked())
	}
	*f.n = out
	return nil
}

func joinPrefixes(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Validate returns every problem with the configuration.
func (c *Agent) Validate() error {
	var errs field.ErrorList
	root := field.NewPath("config")
	if c.NodeName == "" {
		errs = append(errs, field.Required(root.Child("nodeName"), "set --hostname-override"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
			errs = append(errs, field.Invalid(root.Child("nodeName"), c.NodeName, msg))
		}
	}
	if c.SyncPeriod <= 0 {
		errs = append(errs, field.Invalid(root.Child("syncPeriod"), c.SyncPeriod.String(), "must be > 0"))
	}
	if c.MinSyncPeriod < 0 {
		errs = append(errs, field.Invalid(root.Child("minSyncPeriod"), c.MinSyncPeriod.String(), "must be >= 0"))
	} else if c.SyncPeriod > 0 && c.MinSyncPeriod > c.SyncPeriod {
		errs = append(errs, field.Invalid(root.Child("minSyncPeriod"), c.MinSyncPeriod.String(), "must not exceed syncPeriod"))
	}
	for name, addr := range map[string]string{"healthzBindAddress": c.HealthzBindAddress, "metricsBindAddress": c.MetricsBindAddress} {
		if addr == "0" || addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, field.Invalid(root.Child(name), addr, "must be host:port, :port or 0"))
		}
	}
	for i, p := range c.NodePortAddresses.CIDRs {
		if !p.IsValid() {
			errs = append(errs, field.Invalid(root.Child("nodePortAddresses").Index(i), p.String(), `must be a CIDR or "primary"`))
		}
	}
	for i, p := range c.ClusterCIDRs {
		if !p.IsValid() {
			errs = append(errs, field.Invalid(root.Child("clusterCIDRs").Index(i), p.String(), "must be a CIDR"))
		}
	}
	if !slices.Contains(ProxyModes, c.ProxyMode) {
		errs = append(errs, field.NotSupported(root.Child("proxyMode"), c.ProxyMode, ProxyModes))
	}
	if c.ProxyMode == ProxyModeNone && len(c.Announcers) == 0 && !c.Cleanup {
		errs = append(errs, field.Invalid(root.Child("proxyMode"), c.ProxyMode, "runs only the announcers: set --announce (l2, bgp)"))
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		errs = append(errs, field.Invalid(root.Child("masqueradeBit"), c.MasqueradeBit, "must be in 0..31"))
	}
	if c.IPTablesPath == "" {
		errs = append(errs, field.Required(root.Child("iptablesPath"), ""))
	}
	if c.IP6TablesPath == "" {
		errs = append(errs, field.Required(root.Child("ip6tablesPath"), ""))
	}
	if d := c.BGPGracefulRestart; d < 0 || d > maxBGPGracefulRestart || d%time.Second != 0 {
		errs = append(errs, field.Invalid(root.Child("bgp", "gracefulRestart"), d.String(), "must be 0 (off) or whole seconds up to 4095s"))
	}
	if ds := c.DaemonSet; ds != "" {
		ns, name, ok := strings.Cut(ds, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(root.Child("daemonSet"), ds, `must be "namespace/name"`))
		}
	}
	errs = append(errs, c.validateAnnounce(root)...)
	errs = append(errs, c.validateExternalIPs(root)...)
	return aggregate("invalid configuration", errs)
}

func (c *Agent) validateAnnounce(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, class := range c.AnnounceClasses {
		for _, msg := range validation.IsQualifiedName(class) {
			errs = append(errs, field.Invalid(root.Child("announceClasses").Index(i), class, msg))
		}
	}
	for i, a := range c.Announcers {
		needsMembership, ok := KnownAnnouncers[a]
		switch {
		case !ok:
			errs = append(errs, field.NotSupported(root.Child("announcers").Index(i), a, slices.Sorted(maps.Keys(KnownAnnouncers))))
		case needsMembership && !c.Membership.Enabled:
			errs = append(errs, field.Invalid(root.Child("announcers").Index(i), a, "needs --membership"))
		}
	}
	m, mp := c.Membership, root.Child("membership")
	if !m.Enabled {
		return errs
	}
	if m.BindAddress != "" {
		if a, err := netip.ParseAddr(m.BindAddress); err != nil || a.IsUnspecified() || a.Zone() != "" {
			errs = append(errs, field.Invalid(mp.Child("bindAddress"), m.BindAddress, "must be a node IP"))
		}
	}
	if m.Port < 1 || m.Port > 65535 {
		errs = append(errs, field.Invalid(mp.Child("port"), m.Port, "must be in 1..65535"))
	}
	if m.SecretFile != "" {
		if _, err := os.Stat(m.SecretFile); err != nil {
			errs = append(errs, field.Invalid(mp.Child("secretFile"), m.SecretFile, err.Error()))
		}
	}
	if m.Secret != "" {
		ns, name, ok := strings.Cut(m.Secret, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(mp.Child("secret"), m.Secret, `must be "namespace/name"`))
		}
		if m.SecretFile != "" {
			errs = append(errs, field.Invalid(mp.Child("secret"), m.Secret, "secret and secretFile exclude each other"))
		}
	}
	if m.CreateSecret && m.Secret == "" {
		errs = append(errs, field.Invalid(mp.Child("createSecret"), true, "needs secret"))
	}
	if m.ProbeInterval <= 0 {
		errs = append(errs, field.Invalid(mp.Child("probeInterval"), m.ProbeInterval.String(), "must be > 0"))
	}
	if m.ProbeTimeout <= 0 || m.ProbeTimeout >= m.ProbeInterval {
		errs = append(errs, field.Invalid(mp.Child("probeTimeout"), m.ProbeTimeout.String(), "must be > 0 and less than probeInterval"))
	}
	for name, d := range map[string]time.Duration{"gossipInterval": m.GossipInterval, "rejoinInterval": m.RejoinInterval} {
		if d <= 0 {
			errs = append(errs, field.Invalid(mp.Child(name), d.String(), "must be > 0"))
		}
	}
	if m.RestartHold < 0 || m.RestartHold > MaxRestartHold {
		errs = append(errs, field.Invalid(mp.Child("restartHold"), m.RestartHold.String(), "must be in 0.."+MaxRestartHold.String()))
	}
	for name, n := range map[string]int{"suspicionMult": m.SuspicionMult, "suspicionMaxTimeoutMult": m.SuspicionMaxTimeoutMult} {
		if n < 1 {
			errs = append(errs, field.Invalid(mp.Child(name), n, "must be >= 1"))
		}
	}
	return errs
}

// validateExternalIPs: an allow-list comes with the cidrs policy, and only with it (a list the
// policy ignores would read as a restriction that is not there).
func (c *Agent) validateExternalIPs(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	p, path := c.ExternalIPs, root.Child("externalIPs")
	switch {
	case !slices.Contains(ExternalIPPolicies, p.Policy):
		errs = append(errs, field.NotSupported(path.Child("policy"), p.Policy, ExternalIPPolicies))
	case p.Policy == ExternalIPsCIDRs && len(p.AllowedCIDRs) == 0:
		errs = append(errs, field.Required(path.Child("allowedCIDRs"), "--external-ip-policy=cidrs needs --external-ip-allowed-cidrs"))
	case p.Policy != ExternalIPsCIDRs && len(p.AllowedCIDRs) > 0:
		errs = append(errs, field.Invalid(path.Child("allowedCIDRs"), joinPrefixes(p.AllowedCIDRs),
			fmt.Sprintf("--external-ip-allowed-cidrs is read only with --external-ip-policy=cidrs, not %q", p.Policy)))
	}
	for i, pr := range p.AllowedCIDRs {
		if !pr.IsValid() {
			errs = append(errs, field.Invalid(path.Child("allowedCIDRs").Index(i), pr.String(), "must be a CIDR"))
		}
	}
	return errs
}

// RESTConfig loads the client configuration from Kubeconfig, $KUBECONFIG or the in-cluster
// service account, in that order. With a dataplane the agent is the node's service proxy, so
// an API server address that is the kubernetes Service's ClusterIP (the in-cluster
// configuration) is refused with ErrOwnClusterIP: that address leads to the API server only
// through the agent's own rules, which a node does not have when it boots. With
// --proxy-mode=none another proxy programs that ClusterIP, and the address is fine.
func (c *Agent) RESTConfig() (*rest.Config, error) {
	cfg, err := restConfig(c.Kubeconfig, c.Master)
	if err != nil {
		return nil, err
	}
	if c.ProxyMode == ProxyModeNone {
		return cfg, nil
	}
	if err := notOwnClusterIP(cfg.Host, os.Getenv); err != nil {
		return nil, err
	}
	return cfg, nil
}
