package config

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestAgentFlags(t *testing.T) {
	c := DefaultAgent()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
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
	if got := Prefixes(c.NodePortAddresses); len(got) != 2 || got[1].String() != "fd00:c613::/64" {
		t.Errorf("nodeport addresses = %v", got)
	}
	if c.NodePortAddresses[2] != NodePortPrimary {
		t.Errorf("primary keyword not kept: %q", c.NodePortAddresses)
	}
}

func TestAgentValidateListsEveryError(t *testing.T) {
	c := DefaultAgent()
	c.NodeName = "Bad_Name"
	c.SyncPeriod = 0
	c.MinSyncPeriod = -time.Second
	c.HealthzBindAddress = "nonsense"
	c.NodePortAddresses = []string{"10.0.0.1", "Primary"}
	c.ClusterCIDRs = []string{"x"}
	c.MasqueradeBit = 32
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad configuration")
	}
	for _, want := range []string{"nodeName", "syncPeriod", "minSyncPeriod", "healthzBindAddress", "nodePortAddresses[0]", "nodePortAddresses[1]", "clusterCIDRs[0]", "masqueradeBit"} {
		if !strings.Contains(err.Error(), "config."+want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

func TestAgentAnnounceFlags(t *testing.T) {
	c := DefaultAgent()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	c.BindFlags(fs)
	err := fs.Parse([]string{"--node-name=node1", "--announce=l2", "--membership", "--membership-bind-address=198.19.0.11",
		"--membership-port=7947", "--membership-probe-interval=200ms", "--membership-probe-timeout=100ms",
		"--membership-suspicion-mult=3", "--membership-rejoin-interval=1s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := c.Membership
	if len(c.Announcers) != 1 || c.Announcers[0] != AnnouncerL2 || !m.Enabled || m.BindAddress != "198.19.0.11" || m.Port != 7947 ||
		m.ProbeInterval != 200*time.Millisecond || m.ProbeTimeout != 100*time.Millisecond || m.SuspicionMult != 3 || m.RejoinInterval != time.Second {
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
		SuspicionMult: 0, SuspicionMaxTimeoutMult: 1}
	c.Announcers = []string{"l2"}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad membership configuration")
	}
	for _, want := range []string{"bindAddress", "port", "secretFile", "probeTimeout", "gossipInterval", "suspicionMult"} {
		if !strings.Contains(err.Error(), "config.membership."+want) {
			t.Errorf("error does not mention membership.%s:\n%v", want, err)
		}
	}
}
