package nodeproxy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// fakeTraces is a node's netfilter as the agent reads it: nf_tables tables and chains per
// family, the iptables nat chains per family, and read errors.
type fakeTraces struct {
	nft    map[rules.Family]map[string][]string
	nat    map[rules.Family][]string
	nftErr error
	natErr error
}

func (f fakeTraces) nftChains(fam rules.Family) (map[string][]string, error) {
	return f.nft[fam], f.nftErr
}

func (f fakeTraces) natChains(_ context.Context, fam rules.Family) ([]string, error) {
	return f.nat[fam], f.natErr
}

// TestOtherProxyRefused: an agent with a dataplane refuses to start where kube-proxy's rules
// are (either mode, either family, either iptables backend), naming what it found and the
// settings that resolve it; what other programs keep in the kernel (the agent's own table,
// the kubelet's chains, firewalls) does not stop it, nor does a netfilter it cannot read;
// --proxy-mode=none runs beside kube-proxy, and --ignore-other-proxy starts anyway.
func TestOtherProxyRefused(t *testing.T) {
	kubeletOnly := fakeTraces{
		nft: map[rules.Family]map[string][]string{
			rules.IPv4: {"portico": {"services"}, "filter": {"INPUT", "KUBE-FIREWALL"}, "nat": {"PREROUTING", "KUBE-POSTROUTING"}, "firewalld": {"filter_INPUT"}},
			rules.IPv6: {"mangle": {"KUBE-KUBELET-CANARY"}},
		},
		nat: map[rules.Family][]string{rules.IPv4: {"PREROUTING", "KUBE-MARK-MASQ", "PTC-SERVICES"}},
	}
	for _, tc := range []struct {
		name   string
		traces fakeTraces
		found  string // in the error; "" no error
	}{
		{"kube-proxy nftables", fakeTraces{nft: map[rules.Family]map[string][]string{rules.IPv4: {"kube-proxy": {"services", "nat-prerouting"}}}}, "nftables table ip kube-proxy"},
		{"kube-proxy nftables, IPv6 only", fakeTraces{nft: map[rules.Family]map[string][]string{rules.IPv6: {"kube-proxy": {}}}}, "nftables table ip6 kube-proxy"},
		{"kube-proxy iptables-nft", fakeTraces{nft: map[rules.Family]map[string][]string{rules.IPv4: {"nat": {"PREROUTING", "KUBE-SERVICES"}}}}, "KUBE-SERVICES in nftables table ip nat"},
		{"kube-proxy iptables-legacy", fakeTraces{nat: map[rules.Family][]string{rules.IPv4: {"PREROUTING", "KUBE-SERVICES"}}, nftErr: errors.New("no nf_tables")}, "KUBE-SERVICES in the IPv4 nat table"},
		{"kubelet, firewall and the agent's own rules", kubeletOnly, ""},
		{"nothing readable", fakeTraces{nftErr: errors.New("EPERM"), natErr: errors.New("no iptables-save")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{config.ProxyModeNFTables, config.ProxyModeIPTables} {
				err := checkOtherProxy(context.Background(), config.Agent{ProxyMode: mode}, tc.traces)
				if tc.found == "" {
					if err != nil {
						t.Errorf("%s: %v", mode, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s: started beside %s", mode, tc.found)
				}
				for _, want := range []string{tc.found, "kube-proxy", "--proxy-mode=none", "mode: none", "agent.mode=none", "kube-proxy --cleanup", "--ignore-other-proxy", "agent.ignoreOtherProxy"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error lacks %q: %v", mode, want, err)
					}
				}
			}
			for _, cfg := range []config.Agent{{ProxyMode: config.ProxyModeNone}, {ProxyMode: config.ProxyModeNFTables, IgnoreOtherProxy: true}} {
				if err := checkOtherProxy(context.Background(), cfg, tc.traces); err != nil {
					t.Errorf("%+v: %v", cfg, err)
				}
			}
		})
	}
}

// TestAnnounceOnlyConsumers: with --proxy-mode=none the sync loop drives no programmer and no
// health-check servers (the node's other proxy has both), only what the announcers add; with
// a dataplane both come first.
func TestAnnounceOnlyConsumers(t *testing.T) {
	for mode, want := range map[string][]string{config.ProxyModeNone: nil, config.ProxyModeNFTables: {"nftables", "healthcheck"}} {
		cfg := config.DefaultAgent()
		cfg.NodeName, cfg.ProxyMode = "n1", mode
		ctx := context.Background()
		a, err := newAgent(ctx, cfg, kubefake.NewClientset(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var stops stack
		if err := a.startConsumers(ctx, agentEvents{bindFailed: func(types.NamespacedName, uint16, error) {}}, &stops); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		stops.run()
		var got []string
		for _, c := range a.loop.consumers {
			got = append(got, c.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("--proxy-mode=%s: consumers %v, want %v", mode, got, want)
		}
	}
}
