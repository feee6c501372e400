package config

import (
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestAgentFlags(t *testing.T) {
	c := DefaultAgent()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	c.BindFlags(fs)
	err := fs.Parse([]string{"--hostname-override=node1", "--sync-period=5s", "--min-sync-period=100ms",
		"--nodeport-addresses=198.19.0.0/24, fd00:c613::/64,primary", "--cluster-cidr=198.19.1.0/24", "--cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "node1" || c.SyncPeriod != 5*time.Second || c.MinSyncPeriod != 100*time.Millisecond || !c.Cleanup {
		t.Errorf("flags not applied: %+v", c)
	}
	if got := c.NodePortAddresses.CIDRs; len(got) != 2 || got[1].String() != "fd00:c613::/64" {
		t.Errorf("nodeport addresses = %v", got)
	}
	if !c.NodePortAddresses.Primary {
		t.Errorf("primary keyword not kept: %+v", c.NodePortAddresses)
	}
	if len(c.ClusterCIDRs) != 1 || c.ClusterCIDRs[0] != netip.MustParsePrefix("198.19.1.0/24") {
		t.Errorf("cluster CIDRs = %v", c.ClusterCIDRs)
	}
}

// TestAgentKubeProxyFlagNames: the flags that do kube-proxy's job carry its names, and
// portico-agent's first names still work (deprecated).
func TestAgentKubeProxyFlagNames(t *testing.T) {
	parse := func(args ...string) Agent {
		t.Helper()
		c := DefaultAgent()
		fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return c
	}
	kp := parse("--hostname-override=n1", "--iptables-sync-period=7s", "--iptables-min-sync-period=0s", "--iptables-masquerade-bit=14",
		"--proxy-mode=iptables", "--master=https://198.18.0.1:6443", "--masquerade-all")
	old := parse("--node-name=n1", "--sync-period=7s", "--min-sync-period=0s", "--masquerade-bit=14", "--masquerade-all", "--master=https://198.18.0.1:6443",
		"--proxy-mode=iptables")
	if kp.ProxyMode != ProxyModeIPTables || kp.NodeName != "n1" || kp.SyncPeriod != 7*time.Second || kp.MinSyncPeriod != 0 || kp.MasqueradeBit != 14 || kp.Master == "" || !kp.MasqueradeAll {
		t.Errorf("kube-proxy names not applied: %+v", kp)
	}
	if !reflect.DeepEqual(kp, old) {
		t.Errorf("old names differ from kube-proxy's:\n%+v\n%+v", old, kp)
	}
}

// TestAgentBadCIDRIsAStartupError: a bad CIDR fails flag parsing, naming the flag and the value,
// instead of being dropped later.
func TestAgentBadCIDRIsAStartupError(t *testing.T) {
	for _, arg := range []string{"--cluster-cidr=198.19.1.0/24,x", "--nodeport-addresses=10.0.0.1", "--nodeport-addresses=Primary"} {
		c := DefaultAgent()
		fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.BindFlags(fs)
		err := fs.Parse([]string{arg})
		name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), value) {
			t.Errorf("%s: err = %v, want one naming the flag and value", arg, err)
		}
	}
}

func TestAgentValidateListsEveryError(t *testing.T) {
	c := DefaultAgent()
	c.NodeName = "Bad_Name"
	c.SyncPeriod = 0
	c.MinSyncPeriod = -time.Second
	c.HealthzBindAddress = "nonsense"
	c.NodePortAddresses.CIDRs = []netip.Prefix{{}}
	c.ClusterCIDRs = []netip.Prefix{{}}
	c.MasqueradeBit = 32
	c.ProxyMode = "ipvs"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad configuration")
	}
	for _, want := range []string{"nodeName", "syncPeriod", "minSyncPeriod", "healthzBindAddress", "nodePortAddresses[0]", "clusterCIDRs[0]", "masqueradeBit", "proxyMode"} {
		if !strings.Contains(err.Error(), "config."+want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

func TestAgentAnnounceFlags(t *testing.T) {
	c := DefaultAgent()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	c.BindFlags(fs)
	err := fs.Parse([]string{"--node-name=node1", "--announce=l2", "--membership", "--membership-bind-address=198.19.0.11",
		"--membership-port=7947", "--membership-probe-interval=200ms", "--membership-probe-timeout=100ms",
		"--membership-suspicion-mult=3", "--membership-rejoin-interval=1s", "--membership-restart-hold=7s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := c.Membership
	if len(c.Announcers) != 1 || c.Announcers[0] != AnnouncerL2 || !m.Enabled || m.BindAddress != "198.19.0.11" || m.Port != 7947 ||
		m.ProbeInterval != 200*time.Millisecond || m.ProbeTimeout != 100*time.Millisecond || m.SuspicionMult != 3 || m.RejoinInterval != time.Second || m.RestartHold != 7*time.Second {
		t.Errorf("flags not applied: %+v", c)
	}
}

func TestAgentValidateListsEveryAnnounceError(t *testing.T) {
	c := DefaultAgent()
	c.Announcers = []string{"l2", "bpg"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "config.announcers[0]") || !strings.Contains(err.Error(), "needs --membership") ||
		!strings.Contains(err.Error(), `config.announcers[1]: Unsupported value: "bpg"`) {
		t.Errorf("Validate = %v, want l2 needing membership and bpg unsupported", err)
	}
	c.Membership = Membership{Enabled: true, BindAddress: "0.0.0.0", Port: 70000, SecretFile: "/nonexistent/secret",
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond, GossipInterval: 0, RejoinInterval: time.Second,
		SuspicionMult: 0, SuspicionMaxTimeoutMult: 1, RestartHold: -time.Second}
	c.Announcers = []string{"l2"}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad membership configuration")
	}
	for _, want := range []string{"bindAddress", "port", "secretFile", "probeTimeout", "gossipInterval", "suspicionMult", "restartHold"} {
		if !strings.Contains(err.Error(), "config.membership."+want) {
			t.Errorf("error does not mention membership.%s:\n%v", want, err)
		}
	}
	// The keys' Secret: "namespace/name", not with a key file; create needs it.
	c.Membership = DefaultMembership()
	c.Membership.Enabled, c.Membership.Secret, c.Membership.CreateSecret = true, "portico-membership", true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "config.membership.secret") {
		t.Errorf("Validate = %v, want membership.secret refused", err)
	}
	c.Membership.Secret = ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "config.membership.createSecret") {
		t.Errorf("Validate = %v, want membership.createSecret refused without a secret", err)
	}
	c.Membership.Secret = "kube-system/portico-membership"
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v with a valid membership Secret", err)
	}
}

// TestAgentBGPGracefulRestart: 30 s by default, 0 turns it off, and a value BGP cannot carry
// is a startup error.
func TestAgentBGPGracefulRestart(t *testing.T) {
	if d := DefaultAgent().BGPGracefulRestart; d != 30*time.Second {
		t.Errorf("default %s; want 30s", d)
	}
	for _, tc := range []struct {
		flag string
		ok   bool
	}{{"0", true}, {"120s", true}, {"4095s", true}, {"4096s", false}, {"1500ms", false}, {"-1s", false}} {
		c, err := parseAgent(t, "--bgp-graceful-restart="+tc.flag)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "config.bgp.gracefulRestart")) {
			t.Errorf("--bgp-graceful-restart=%s: Validate = %v; want ok %v", tc.flag, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		flag string
		ok   bool
	}{{"kube-system/portico-agent", true}, {"portico-agent", false}, {"Kube/x", false}} {
		// --bgp-daemonset is the deprecated first name of --daemonset.
		for _, name := range []string{"--daemonset=", "--bgp-daemonset="} {
			c, err := parseAgent(t, name+tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			if c.DaemonSet != tc.flag {
				t.Errorf("%s%s: DaemonSet %q", name, tc.flag, c.DaemonSet)
			}
			err = c.Validate()
			if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "config.daemonSet")) {
				t.Errorf("%s%s: Validate = %v; want ok %v", name, tc.flag, err, tc.ok)
			}
		}
	}
}

// TestAgentProxyModes: iptables, nftables and none (with an announcer) are accepted; anything
// else is a startup error naming the accepted values.
func TestAgentProxyModes(t *testing.T) {
	for mode, ok := range map[string]bool{"iptables": true, "nftables": true, "none": true, "ipvs": false, "": false, "NFTables": false} {
		c := DefaultAgent()
		c.NodeName = "node1"
		c.ProxyMode = mode
		c.Announcers = []string{AnnouncerBGP}
		err := c.Validate()
		if ok != (err == nil) {
			t.Errorf("--proxy-mode=%q: %v", mode, err)
		}
		if err != nil && !strings.Contains(err.Error(), `"nftables"`) {
			t.Errorf("--proxy-mode=%q: error does not list the accepted values: %v", mode, err)
		}
	}
}

// TestAgentExternalIPPolicy (issue 31 item 6): allow by default (kube-proxy's behaviour); deny
// and cidrs with their allow-list parse from flags; a bad value is a startup error naming the
// flag, and an allow-list without the cidrs policy, or the cidrs policy without one, is refused
// by Validate naming the flags.
func TestAgentExternalIPPolicy(t *testing.T) {
	if p := DefaultAgent().ExternalIPs; p.Policy != ExternalIPsAllow || p.AllowedCIDRs != nil {
		t.Errorf("default %+v; want allow without a list", p)
	}
	parse := func(args ...string) (Agent, error) {
		c := DefaultAgent()
		c.NodeName = "node1"
		fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	for _, tc := range []struct {
		args []string
		want ExternalIPPolicy
	}{
		{nil, ExternalIPPolicy{Policy: "allow"}},
		{[]string{"--external-ip-policy=allow"}, ExternalIPPolicy{Policy: "allow"}},
		{[]string{"--external-ip-policy=deny"}, ExternalIPPolicy{Policy: "deny"}},
		{[]string{"--external-ip-policy=cidrs", "--external-ip-allowed-cidrs=198.18.64.7/24, fd00:c613:64::/64"},
			ExternalIPPolicy{Policy: "cidrs", AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.64.0/24"), netip.MustParsePrefix("fd00:c613:64::/64")}}},
	} {
		c, err := parse(tc.args...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if !reflect.DeepEqual(c.ExternalIPs, tc.want) {
			t.Errorf("%v: %+v, want %+v", tc.args, c.ExternalIPs, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string // in the error
	}{
		{[]string{"--external-ip-policy=Deny"}, []string{"--external-ip-policy", `"Deny"`, "allow, deny, cidrs"}},
		{[]string{"--external-ip-policy=none"}, []string{"--external-ip-policy", `"none"`}},
		{[]string{"--external-ip-policy=cidrs", "--external-ip-allowed-cidrs=198.18.64.0"}, []string{"--external-ip-allowed-cidrs", "198.18.64.0"}},
		{[]string{"--external-ip-policy=cidrs"}, []string{"config.externalIPs.allowedCIDRs", "--external-ip-allowed-cidrs"}},
		{[]string{"--external-ip-allowed-cidrs=198.18.64.0/24"}, []string{"config.externalIPs.allowedCIDRs", "--external-ip-policy=cidrs"}},
		{[]string{"--external-ip-policy=deny", "--external-ip-allowed-cidrs=198.18.64.0/24"}, []string{"config.externalIPs.allowedCIDRs", `not "deny"`}},
	} {
		_, err := parse(tc.args...)
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %s", tc.args, err, w)
			}
		}
	}
}

// TestAgentAnnounceOnly: --proxy-mode=none without an announcer has nothing to do and is a
// startup error saying what to set; with one it is valid, and /healthz and /metrics leave
// kube-proxy's ports (10256, 10249), which kube-proxy holds beside it, unless the command line
// or the file sets them. The dataplane modes keep kube-proxy's ports.
func TestAgentAnnounceOnly(t *testing.T) {
	c := DefaultAgent()
	c.NodeName, c.ProxyMode = "node1", ProxyModeNone
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "proxyMode") || !strings.Contains(err.Error(), "--announce") {
		t.Errorf("--proxy-mode=none without --announce: %v; want an error naming --announce", err)
	}
	c.Cleanup = true
	if err := c.Validate(); err != nil {
		t.Errorf("--proxy-mode=none --cleanup: %v", err)
	}
	file := writeFile(t, "apiVersion: config.portico-lb.io/v1alpha1\nkind: AgentConfiguration\nmode: none\nannounce: [bgp]\nhealthzBindAddress: 0.0.0.0:10400\n")
	for _, tc := range []struct {
		args             []string
		healthz, metrics string
	}{
		{[]string{"--proxy-mode=none", "--announce=bgp"}, "0.0.0.0:10266", "127.0.0.1:10269"},
		{[]string{"--proxy-mode=none", "--announce=bgp", "--metrics-bind-address=0"}, "0.0.0.0:10266", "0"},
		{[]string{"--config=" + file}, "0.0.0.0:10400", "127.0.0.1:10269"},
		{[]string{"--config=" + file, "--proxy-mode=nftables"}, "0.0.0.0:10400", "127.0.0.1:10249"},
		{[]string{"--proxy-mode=iptables"}, "0.0.0.0:10256", "127.0.0.1:10249"},
		{[]string{"--proxy-mode=nftables", "--announce=l2", "--membership"}, "0.0.0.0:10256", "127.0.0.1:10249"},
	} {
		c, err := parseAgent(t, append(tc.args, "--hostname-override=node1")...)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if c.HealthzBindAddress != tc.healthz || c.MetricsBindAddress != tc.metrics {
			t.Errorf("%v: /healthz on %s, /metrics on %s; want %s, %s", tc.args, c.HealthzBindAddress, c.MetricsBindAddress, tc.healthz, tc.metrics)
		}
	}
}
