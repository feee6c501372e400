package config

import (
	"flag"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"

	"github.com/portico-lb/portico/nodeproxy/membership"
)

// Agent is the configuration of portico-agent, the per-node dataplane.
type Agent struct {
	// Kubeconfig path; empty means in-cluster or $KUBECONFIG.
	Kubeconfig string
	// NodeName is this node's Node object; defaults to the hostname.
	NodeName string
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
	// NodePortAddresses restricts NodePorts to node addresses within these CIDRs, plus the
	// node's primary IP of each family when the list holds "primary" (as kube-proxy). A family
	// with neither keeps the default: every local address except loopback.
	NodePortAddresses []string
	// ClusterCIDRs hold the pods' addresses: traffic from outside them to a ClusterIP is
	// masqueraded, traffic from inside them to an externalTrafficPolicy: Local address is sent
	// to any endpoint. Empty disables both.
	ClusterCIDRs []string
	// MasqueradeAll masquerades all ClusterIP traffic.
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit (0-31) that asks for masquerading.
	MasqueradeBit int
	// IPTablesPath and IP6TablesPath name the iptables binaries (the -restore and -save
	// variants are found next to them by suffix).
	IPTablesPath, IP6TablesPath string
	// Announcers names the VIP announcers to run (see KnownAnnouncers); empty: none.
	Announcers []string
	// Membership configures the node-liveness gossip every announcer and the dead-node
	// endpoint filter rely on.
	Membership Membership
}

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
	// SecretFile holds the shared secret that encrypts the gossip (its SHA-256 is the key);
	// empty: unencrypted.
	SecretFile string
	// The failure detector's timings (package membership explains the arithmetic).
	ProbeInterval, ProbeTimeout, GossipInterval, RejoinInterval time.Duration
	SuspicionMult, SuspicionMaxTimeoutMult                      int
}

// DefaultAgent returns the defaults.
func DefaultAgent() Agent {
	host, _ := os.Hostname()
	t := membership.DefaultTimings()
	return Agent{
		NodeName:           strings.ToLower(host),
		SyncPeriod:         30 * time.Second,
		MinSyncPeriod:      1 * time.Second,
		HealthzBindAddress: "0.0.0.0:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		MasqueradeBit:      12,
		IPTablesPath:       "iptables",
		IP6TablesPath:      "ip6tables",
		Membership: Membership{
			Port:                    membership.DefaultPort,
			ProbeInterval:           t.ProbeInterval,
			ProbeTimeout:            t.ProbeTimeout,
			GossipInterval:          t.GossipInterval,
			RejoinInterval:          membership.DefaultConfig().RejoinInterval,
			SuspicionMult:           t.SuspicionMult,
			SuspicionMaxTimeoutMult: t.SuspicionMaxTimeoutMult,
		},
	}
}

// BindFlags registers the agent's flags on fs.
func (c *Agent) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "path to a kubeconfig; empty means in-cluster")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "name of this node's Node object (default: the hostname)")
	fs.StringVar(&c.NodeName, "hostname-override", c.NodeName, "alias of --node-name, as kube-proxy spells it")
	fs.DurationVar(&c.SyncPeriod, "sync-period", c.SyncPeriod, "how often every owned chain is rewritten, repairing drift")
	fs.DurationVar(&c.MinSyncPeriod, "min-sync-period", c.MinSyncPeriod, "shortest time between syncs; faster changes are batched")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "address of /healthz and /livez (0 disables)")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address of /metrics (0 disables)")
	fs.BoolVar(&c.Cleanup, "cleanup", c.Cleanup, "remove every chain and rule the agent installed, then exit")
	fs.Func("nodeport-addresses", "comma list of CIDRs and/or \"primary\" (the Node's primary IP per family): NodePorts answer only on local addresses within them (default: every local address except loopback)", func(s string) error {
		c.NodePortAddresses = splitList(s)
		return nil
	})
	fs.Func("cluster-cidr", "comma list of the pods' CIDRs (enables masquerading of off-cluster ClusterIP traffic and the externalTrafficPolicy: Local short-circuit)", func(s string) error {
		c.ClusterCIDRs = splitList(s)
		return nil
	})
	fs.BoolVar(&c.MasqueradeAll, "masquerade-all", c.MasqueradeAll, "masquerade all traffic sent to ClusterIPs")
	fs.IntVar(&c.MasqueradeBit, "masquerade-bit", c.MasqueradeBit, "fwmark bit (0-31) marking packets to masquerade")
	fs.StringVar(&c.IPTablesPath, "iptables", c.IPTablesPath, "iptables binary; iptables-restore and iptables-save are its siblings")
	fs.StringVar(&c.IP6TablesPath, "ip6tables", c.IP6TablesPath, "ip6tables binary")
	fs.Func("announce", `comma list of VIP announcers to run: "l2" (ARP/NDP for AddressPools with spec.announce.l2; needs --membership), "bgp" (routes for AddressPools with spec.announce.bgp to the BGPPeers selecting this node)`, func(s string) error {
		c.Announcers = splitList(s)
		return nil
	})
	m := &c.Membership
	fs.BoolVar(&m.Enabled, "membership", m.Enabled, "run the agents' membership (memberlist): node liveness for announcers and for leaving out endpoints on dead nodes")
	fs.StringVar(&m.BindAddress, "membership-bind-address", m.BindAddress, "node IP membership listens on and advertises (default: the Node's first InternalIP)")
	fs.IntVar(&m.Port, "membership-port", m.Port, "membership TCP and UDP port, the same on every node")
	fs.StringVar(&m.SecretFile, "membership-secret-file", m.SecretFile, "file holding the shared secret that encrypts membership traffic (default: unencrypted)")
	fs.DurationVar(&m.ProbeInterval, "membership-probe-interval", m.ProbeInterval, "how often each agent probes another")
	fs.DurationVar(&m.ProbeTimeout, "membership-probe-timeout", m.ProbeTimeout, "how long a probe waits for its ack (less than the interval)")
	fs.IntVar(&m.SuspicionMult, "membership-suspicion-mult", m.SuspicionMult, "probe intervals (times max(1, log10(nodes))) a suspected node has to refute before it is declared dead")
	fs.IntVar(&m.SuspicionMaxTimeoutMult, "membership-suspicion-max-timeout-mult", m.SuspicionMaxTimeoutMult, "upper bound of the suspicion timeout, as a multiple of its minimum")
	fs.DurationVar(&m.GossipInterval, "membership-gossip-interval", m.GossipInterval, "how often membership news is gossiped")
	fs.DurationVar(&m.RejoinInterval, "membership-rejoin-interval", m.RejoinInterval, "how often nodes missing from the view are joined again")
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
		errs = append(errs, field.Required(root.Child("nodeName"), "set --node-name"))
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
	for i, s := range c.NodePortAddresses {
		if _, err := netip.ParsePrefix(s); err != nil && s != NodePortPrimary {
			errs = append(errs, field.Invalid(root.Child("nodePortAddresses").Index(i), s, `must be a CIDR or "primary"`))
		}
	}
	for i, s := range c.ClusterCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs = append(errs, field.Invalid(root.Child("clusterCIDRs").Index(i), s, "must be a CIDR"))
		}
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
	errs = append(errs, c.validateAnnounce(root)...)
	return aggregate("invalid configuration", errs)
}

func (c *Agent) validateAnnounce(root *field.Path) field.ErrorList {
	var errs field.ErrorList
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
	for name, n := range map[string]int{"suspicionMult": m.SuspicionMult, "suspicionMaxTimeoutMult": m.SuspicionMaxTimeoutMult} {
		if n < 1 {
			errs = append(errs, field.Invalid(mp.Child(name), n, "must be >= 1"))
		}
	}
	return errs
}

// NodePortPrimary in NodePortAddresses stands for the Node's primary IP of each family.
const NodePortPrimary = "primary"

// Prefixes parses CIDR strings already checked by Validate, skipping keywords.
func Prefixes(list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// RESTConfig loads the client configuration from Kubeconfig, $KUBECONFIG or the in-cluster
// service account, in that order.
func (c *Agent) RESTConfig() (*rest.Config, error) {
	return restConfig(c.Kubeconfig)
}
