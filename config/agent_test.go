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
