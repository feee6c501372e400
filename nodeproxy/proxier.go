package nodeproxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// familyProxier holds one IP family's state: the rendered service ports and what the last
// successful restore wrote.
type familyProxier struct {
	family    rules.Family
	nf        Netfilter
	baseCfg   rules.Config
	npCIDRs   []netip.Prefix // NodePorts answer on local addresses in these...
	npPrimary bool           // ...and on the Node's primary IP of the family
	builder   *rules.Builder
	ports     map[types.NamespacedName][]*rules.ServicePort
	applied   *rules.Ruleset // nil: the kernel's state is unknown, the next sync is full
	// nodePorts is where the last full sync made NodePorts answer: nil for every local address.
	nodePorts []netip.Addr
	jumpsDone bool
}

// syncResult describes one family's sync for metrics.
type syncResult struct {
	full      bool
	nat, filt int
	// noLocalExternal and noLocalInternal count the ports whose Local traffic policy (external,
	// internal) finds no local endpoint.
	noLocalExternal, noLocalInternal int
	// chainsWritten counts the chains the sync's restore wrote or deleted (0: nothing restored).
	chainsWritten int
	// repaired names (up to 10 of) the chains a full sync wrote: all on the first, drifted ones after.
	repaired []string
}

// sync brings the family's rules up to date for the changed Services (all of them when full),
// in one iptables-restore, then removes stale UDP conntrack entries.
func (p *familyProxier) sync(ctx context.Context, t *tracker, keys []types.NamespacedName, full bool, ct Conntrack, m *metrics) (syncResult, error) {
	full = full || p.applied == nil
	if full {
		cfg := p.baseCfg
		if len(p.npCIDRs) > 0 || p.npPrimary {
			addrs, err := localAddresses(p.family, p.npCIDRs)
			if err != nil {
				return syncResult{}, err
			}
			if p.npPrimary {
				if ip, ok := primaryIP(t.thisNode(), p.family); ok && !slices.Contains(addrs, ip) {
					addrs = append(addrs, ip)
				}
			}
			cfg.NodePortsRestricted, cfg.NodePortAddresses = true, addrs
		}
		p.nodePorts = nil
		if cfg.NodePortsRestricted {
			p.nodePorts = append([]netip.Addr{}, cfg.NodePortAddresses...)
		}
		p.builder = rules.NewBuilder(cfg)
		p.ports = map[types.NamespacedName][]*rules.ServicePort{}
	}
	stale := newStaleUDP()
	node := nodeOf(t.node, t.thisNode())
	for _, key := range keys {
		svc, slices, err := t.service(key)
		if err != nil {
			return syncResult{}, err
		}
		for _, old := range p.ports[key] {
			p.builder.Delete(old.Key())
			gone := *old
			gone.Endpoints = nil
			stale.add(&gone)
		}
		delete(p.ports, key)
		if svc == nil {
			continue
		}
		ports := ServicePorts(svc, slices, node, p.family)
		for _, sp := range ports {
			p.builder.Set(sp)
			stale.add(sp)
		}
		if len(ports) > 0 {
			p.ports[key] = ports
		}
	}

	rs := p.builder.Ruleset()
	var input []byte
	var saved rules.Saved
	if full {
		// Compare with what the kernel holds: without drift nothing is written.
		var err error
		if saved, err = p.nf.Save(ctx); err != nil {
			p.applied = nil
			return syncResult{}, err
		}
		input = rules.RestoreInput(nil, rs, saved)
	} else {
		input = rules.RestoreInput(p.applied, rs, nil)
	}
	if input != nil {
		if err := p.nf.Restore(ctx, input); err != nil {
			p.applied = nil
			m.restoreFailures.Inc()
			if !full {
				m.partialRestoreFailures.Inc()
			}
			return syncResult{}, fmt.Errorf("restoring %s rules: %w", p.family, err)
		}
	}
	var repaired []string
	if full && input != nil {
		repaired = rules.WrittenChains(input, 10)
	}
	p.applied = rs
	if full || !p.jumpsDone {
		for _, j := range rules.Jumps() {
			if saved != nil && saved.HasJump(j) {
				continue
			}
			if err := p.nf.EnsureJump(j); err != nil {
				p.applied, p.jumpsDone = nil, false
				return syncResult{}, err
			}
		}
		p.jumpsDone = true
	}
	if !stale.empty() && ct != nil {
		n, err := ct.DeleteUDP(p.family, stale)
		m.conntrackDeleted.Add(float64(n))
		if err != nil {
			// The rules are right; a later change retries. Not a sync failure.
			logFromContext(ctx).Error(err, "Cannot delete stale UDP conntrack entries", "family", p.family)
		}
	}
	res := syncResult{full: full, nat: rs.RuleCount(rules.TableNAT), filt: rs.RuleCount(rules.TableFilter),
		chainsWritten: rules.ChainsWritten(input), repaired: repaired}
	res.noLocalExternal, res.noLocalInternal = p.builder.NoLocalEndpoints()
	return res, nil
}

// localAddresses are this namespace's addresses of family inside cidrs.
func localAddresses(family rules.Family, cidrs []netip.Prefix) ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing local addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if !family.Contains(ip) || ip.IsLoopback() {
			continue // loopback NodePorts would need route_localnet; not offered
		}
		for _, c := range cidrs {
			if c.Contains(ip) {
				out = append(out, ip)
				break
			}
		}
	}
	return out, nil
}

// primaryIP is node's first InternalIP of family, else its first ExternalIP (kube-proxy's
// "primary" node IP).
func primaryIP(node *corev1.Node, family rules.Family) (netip.Addr, bool) {
	if node == nil {
		return netip.Addr{}, false
	}
	for _, kind := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != kind {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && family.Contains(ip.Unmap()) {
				return ip.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}
