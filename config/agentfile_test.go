package config

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// parseAgent binds, parses args, completes (loading --config) and returns the result.
func parseAgent(t *testing.T, args ...string) (Agent, error) {
	t.Helper()
	c := DefaultAgent()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.Complete(fs)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const fullFile = `apiVersion: config.portico-lb.io/v1alpha1
kind: AgentConfiguration
master: https://198.18.0.10:6443
hostnameOverride: node-a
mode: iptables
ignoreOtherProxy: true
healthzBindAddress: 0.0.0.0:10300
metricsBindAddress: "0"
nodePortAddresses: [198.19.0.0/24, primary]
clusterCIDRs: [198.19.1.0/24, fd00:c613:1::/64]
iptables:
  syncPeriod: 45s
  minSyncPeriod: 2s
  masqueradeAll: true
  masqueradeBit: 13
  path: /usr/sbin/iptables-nft
  ip6Path: /usr/sbin/ip6tables-nft
announce: [bgp]
bgp: {gracefulRestart: 45s}
daemonSet: kube-system/portico-agent
uninstallCleanup: false
ignoreExcludeLB: true
externalIPs: {policy: cidrs, allowedCIDRs: [198.18.64.0/24]}
membership:
  enabled: true
  port: 7999
  probeInterval: 200ms
  probeTimeout: 100ms
  suspicionMult: 5
  restartHold: 20s
`

// TestAgentConfigurationFile: every key reaches the setting its flag sets.
func TestAgentConfigurationFile(t *testing.T) {
	c, err := parseAgent(t, "--config="+writeFile(t, fullFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Master != "https://198.18.0.10:6443" || c.NodeName != "node-a" || c.HealthzBindAddress != "0.0.0.0:10300" || c.MetricsBindAddress != "0" {
		t.Errorf("top-level keys not applied: %+v", c)
	}
	if c.SyncPeriod != 45*time.Second || c.MinSyncPeriod != 2*time.Second || !c.MasqueradeAll || c.MasqueradeBit != 13 ||
		c.IPTablesPath != "/usr/sbin/iptables-nft" || c.IP6TablesPath != "/usr/sbin/ip6tables-nft" {
		t.Errorf("iptables keys not applied: %+v", c)
	}
	if len(c.ClusterCIDRs) != 2 || c.ClusterCIDRs[1] != netip.MustParsePrefix("fd00:c613:1::/64") || !c.NodePortAddresses.Primary || len(c.NodePortAddresses.CIDRs) != 1 {
		t.Errorf("address lists not applied: %v %+v", c.ClusterCIDRs, c.NodePortAddresses)
	}
	m := c.Membership
	if len(c.Announcers) != 1 || c.Announcers[0] != "bgp" || !m.Enabled || m.Port != 7999 || m.ProbeInterval != 200*time.Millisecond || m.ProbeTimeout != 100*time.Millisecond || m.SuspicionMult != 5 || m.RestartHold != 20*time.Second {
		t.Errorf("announce and membership not applied: %v %+v", c.Announcers, m)
	}
	if !c.IgnoreExcludeLB || !c.IgnoreOtherProxy {
		t.Errorf("ignoreExcludeLB (%v) or ignoreOtherProxy (%v) not applied", c.IgnoreExcludeLB, c.IgnoreOtherProxy)
	}
	if e := c.ExternalIPs; e.Policy != ExternalIPsCIDRs || len(e.AllowedCIDRs) != 1 || e.AllowedCIDRs[0] != netip.MustParsePrefix("198.18.64.0/24") {
		t.Errorf("externalIPs not applied: %+v", e)
	}
	if c.BGPGracefulRestart != 45*time.Second || c.DaemonSet != "kube-system/portico-agent" || c.UninstallCleanup {
		t.Errorf("bgp, daemonSet and uninstallCleanup keys not applied: %s %q %v", c.BGPGracefulRestart, c.DaemonSet, c.UninstallCleanup)
	}
	// Keys the file leaves out keep their defaults.
	if d := DefaultMembership(); m.GossipInterval != d.GossipInterval || m.RejoinInterval != d.RejoinInterval {
		t.Errorf("unset membership keys lost their defaults: %+v", m)
	}
}

// TestAgentConfigurationOldDaemonSetKey: bgp.daemonSet, where daemonSet was first read, still
// sets it.
func TestAgentConfigurationOldDaemonSetKey(t *testing.T) {
	c, err := parseAgent(t, "--config="+writeFile(t, "apiVersion: config.portico-lb.io/v1alpha1\nkind: AgentConfiguration\nbgp: {daemonSet: kube-system/portico-agent}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.DaemonSet != "kube-system/portico-agent" || !c.UninstallCleanup {
		t.Errorf("DaemonSet %q, UninstallCleanup %v; want kube-system/portico-agent and the default true", c.DaemonSet, c.UninstallCleanup)
	}
}

// TestAgentConfigurationFlagsWin: flags on the command line override the file, wherever they
// stand relative to --config.
func TestAgentConfigurationFlagsWin(t *testing.T) {
	file := writeFile(t, fullFile)
	c, err := parseAgent(t, "--iptables-sync-period=10s", "--config="+file, "--master=https://198.18.0.20:6443", "--node-name=node-b")
	if err != nil {
		t.Fatal(err)
	}
	if c.SyncPeriod != 10*time.Second || c.Master != "https://198.18.0.20:6443" || c.NodeName != "node-b" {
		t.Errorf("command-line flags did not win: sync %v master %s node %s", c.SyncPeriod, c.Master, c.NodeName)
	}
	if c.MinSyncPeriod != 2*time.Second {
		t.Errorf("the file's minSyncPeriod lost: %v", c.MinSyncPeriod)
	}
}

// TestAgentConfigurationStrict: an unknown or repeated key, a wrong kind or version, or a bad
// value is an error naming it.
func TestAgentConfigurationStrict(t *testing.T) {
	const head = "apiVersion: config.portico-lb.io/v1alpha1\nkind: AgentConfiguration\n"
	for _, tc := range []struct{ name, file, want string }{
		{"unknown key", head + "mastr: https://x\n", "mastr"},
		{"unknown nested key", head + "iptables:\n  syncPeriods: 1s\n", "syncPeriods"},
		{"repeated key", head + "master: a\nmaster: b\n", "master"},
		{"wrong kind", "apiVersion: config.portico-lb.io/v1alpha1\nkind: KubeProxyConfiguration\n", "KubeProxyConfiguration"},
		{"no version", "kind: AgentConfiguration\n", "apiVersion"},
		{"bad duration", head + "iptables:\n  syncPeriod: soon\n", "soon"},
		{"bad CIDR", head + "clusterCIDRs: [10.0.0.0]\n", "clusterCIDRs"},
		{"wrong type", head + "membership:\n  port: high\n", "port"},
		{"unknown externalIPs policy", head + "externalIPs: {policy: block}\n", "externalIPs.policy"},
		{"externalIPs CIDR not a CIDR", head + "externalIPs: {policy: cidrs, allowedCIDRs: [198.18.64.1]}\n", "externalIPs.allowedCIDRs"},
		{"missing file", "", "reading config file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.yaml")
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			_, err := parseAgent(t, "--config="+path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestAgentConfigurationKeys: every key of the file is listed once, each with a flag the agent
// has.
func TestAgentConfigurationKeys(t *testing.T) {
	c := DefaultAgent()
	fs := pflag.NewFlagSet("portico-agent", pflag.ContinueOnError)
	c.BindFlags(fs)
	keys := AgentConfigurationKeys()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.Key] {
			t.Errorf("key %s listed twice", k.Key)
		}
		seen[k.Key] = true
		if fs.Lookup(k.Flag) == nil {
			t.Errorf("key %s: no flag --%s", k.Key, k.Flag)
		}
	}
	for _, want := range []string{"master", "iptables.syncPeriod", "membership.restartHold", "bgp.gracefulRestart", "daemonSet", "uninstallCleanup"} {
		if !seen[want] {
			t.Errorf("key %s not listed (got %v)", want, keys)
		}
	}
}
