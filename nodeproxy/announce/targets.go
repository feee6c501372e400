package announce

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// Target is one VIP to announce and what the choice of its announcing nodes depends on. Every
// agent computes the same Targets from the same tracked objects.
type Target struct {
	// VIP is a status.loadBalancer.ingress IP of at least one Service of type LoadBalancer.
	VIP netip.Addr
	// Services hold VIP (several when they share it), sorted.
	Services []types.NamespacedName
	// Pool is the AddressPool that contains VIP (a usable one when several do).
	Pool *v1alpha1.AddressPool
	// LocalOnly is set when a Service holding VIP has externalTrafficPolicy: Local; only
	// the nodes in WithEndpoints may then attract its traffic.
	LocalOnly bool
	// WithEndpoints are the nodes hosting a ready endpoint of a Local Service holding VIP.
	WithEndpoints map[string]bool
}

// Targets returns the VIPs of every Service of type LoadBalancer of classes (Classes: the
// classes a Portico bare-metal provider serves) that an AddressPool contains, sorted by
// address, with their pool and endpoint nodes. VIPs outside every pool (another provider's)
// and VIPs only Services of other classes hold are not announced, whatever their status says.
// Ingress entries with ipMode Proxy are skipped: the load balancer delivers to the node, not
// to the VIP.
func Targets(st *tracker.State, classes Classes) ([]Target, error) {
	items, err := st.Store.AddressPools()
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, nil
	}
	pools := addresspool.Resolve(items)
	byName := map[string]*v1alpha1.AddressPool{}
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	keys, err := st.Store.Services()
	if err != nil {
		return nil, err
	}
	byVIP := map[netip.Addr]*Target{}
	for _, key := range keys {
		svc, eps, err := st.Service(key)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", key, err)
		}
		if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !classes.Announces(svc.Spec.LoadBalancerClass) {
			continue
		}
		local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy {
				continue
			}
			vip, err := netip.ParseAddr(ing.IP)
			if err != nil {
				continue
			}
			vip = vip.Unmap()
			t := byVIP[vip]
			if t == nil {
				p := addresspool.Containing(pools, vip)
				if p == nil {
					continue
				}
				t = &Target{VIP: vip, Pool: byName[p.Name], WithEndpoints: map[string]bool{}}
				byVIP[vip] = t
			}
			if !slices.Contains(t.Services, key) {
				t.Services = append(t.Services, key)
			}
			if local {
				t.LocalOnly = true
				for _, s := range eps {
					for _, e := range s.Endpoints {
						ready := e.Conditions.Ready == nil || *e.Conditions.Ready
						if ready && e.NodeName != nil {
							t.WithEndpoints[*e.NodeName] = true
						}
					}
				}
			}
		}
	}
	out := make([]Target, 0, len(byVIP))
	for _, t := range byVIP {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Target) int { return a.VIP.Compare(b.VIP) })
	return out, nil
}
