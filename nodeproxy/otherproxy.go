package nodeproxy

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// kube-proxy's marks in the kernel: its nftables mode owns one table of this name in the ip
// and ip6 families; its iptables mode (and IPVS mode) dispatches Services from this chain of
// the nat table.
const (
	kubeProxyTable        = "kube-proxy"
	kubeProxyServiceChain = "KUBE-SERVICES"
)

// proxyTraces is what the agent reads of the node's netfilter to find another service proxy
// (nodeTraces; a fake in the tests).
type proxyTraces interface {
	// nftChains returns family f's nf_tables tables and their chains' names.
	nftChains(f rules.Family) (map[string][]string, error)
	// natChains returns the chains of family f's iptables nat table as the configured
	// iptables binary sees it (the legacy backend included); none without the binary.
	natChains(ctx context.Context, f rules.Family) ([]string, error)
}

// nodeTraces reads the node's nf_tables over netlink and its iptables with binaries (family ->
// iptables binary).
type nodeTraces struct{ binaries map[rules.Family]string }

var _ proxyTraces = nodeTraces{}

func (nodeTraces) nftChains(f rules.Family) (map[string][]string, error) { return nftables.Chains(f) }

func (n nodeTraces) natChains(ctx context.Context, f rules.Family) ([]string, error) {
	return netfilter.NATChains(ctx, n.binaries[f])
}

// nftFamilies names rules' families as nft does.
var nftFamilies = map[rules.Family]string{rules.IPv4: "ip", rules.IPv6: "ip6"}

// findOtherProxy returns what it finds of another service proxy's rules ("" nothing):
// kube-proxy's nftables table, or its KUBE-SERVICES chain in a nat table (iptables-nft's, seen
// over netlink, or the configured iptables binary's). A source it cannot read is logged and
// skipped: the check guards against a mistake, it is not a reason to stop.
func findOtherProxy(ctx context.Context, t proxyTraces) string {
	log := logr.FromContextOrDiscard(ctx)
	for _, f := range []rules.Family{rules.IPv4, rules.IPv6} {
		tables, err := t.nftChains(f)
		if err != nil {
			log.V(1).Info("Cannot read the nftables tables to look for another service proxy", "family", f, "err", err)
		}
		if _, ok := tables[kubeProxyTable]; ok {
			return fmt.Sprintf("kube-proxy's nftables table %s %s (kube-proxy in nftables mode)", nftFamilies[f], kubeProxyTable)
		}
		if slices.Contains(tables[rules.TableNAT], kubeProxyServiceChain) {
			return fmt.Sprintf("kube-proxy's chain %s in nftables table %s %s (kube-proxy in iptables mode, iptables-nft)", kubeProxyServiceChain, nftFamilies[f], rules.TableNAT)
		}
		chains, err := t.natChains(ctx, f)
		if err != nil {
			log.V(1).Info("Cannot read the iptables nat table to look for another service proxy", "family", f, "err", err)
		}
		if slices.Contains(chains, kubeProxyServiceChain) {
			return fmt.Sprintf("kube-proxy's chain %s in the %s nat table (kube-proxy in iptables mode)", kubeProxyServiceChain, f)
		}
	}
	return ""
}

// checkOtherProxy refuses to start a dataplane where another service proxy's rules are: two
// proxies would program the same Service addresses. The error names what it found and the
// settings that resolve it. --proxy-mode=none runs beside one by design; --ignore-other-proxy
// starts anyway, saying so.
func checkOtherProxy(ctx context.Context, cfg config.Agent, t proxyTraces) error {
	if cfg.ProxyMode == config.ProxyModeNone {
		return nil
	}
	found := findOtherProxy(ctx, t)
	if found == "" {
		return nil
	}
	if cfg.IgnoreOtherProxy {
		logr.FromContextOrDiscard(ctx).Info("Another service proxy's rules are on this node; programming Services beside them (--ignore-other-proxy)", "found", found)
		return nil
	}
	return fmt.Errorf("another service proxy programs this node's Services: found %s. "+
		"To run Portico beside it (it keeps the Service rules, Portico announces the VIPs), set --proxy-mode=none "+
		"(config file: mode: none; chart: agent.mode=none). To let Portico replace it, remove kube-proxy and its rules "+
		"(kube-proxy --cleanup on the node). Only for a switch's overlap or rules known to be stale, set --ignore-other-proxy "+
		"(config file: ignoreOtherProxy; chart: agent.ignoreOtherProxy)", found)
}
