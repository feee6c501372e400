package metallb

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/controllers/servicemodel"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/baremetal"
)

// Kept is what the bare-metal allocator, run against the converted pools, decides for one
// Service MetalLB serves.
type Kept struct {
	Service string // namespace/name
	// Status are the addresses of the Service's status.loadBalancer.ingress, in order.
	Status []string
	// Portico are the addresses portico-controller would report ("" entries never); empty when
	// it would not serve the Service (Problem says why).
	Portico []string
	// Problem explains why the Service would not keep its addresses; "" when it keeps them.
	Problem string
}

// Keeps reports whether the Service keeps exactly its addresses.
func (k Kept) Keeps() bool { return k.Problem == "" }

// CheckServices runs every LoadBalancer Service of class (nil: class-less, as MetalLB without
// --lb-class) through the bare-metal provider's allocator (the code portico-controller runs)
// against pools, the way a starting controller does: it restores what each Service's status
// says it holds (oldest first), then ensures each Service. nsLabels gives each namespace's
// labels (for pools that select namespaces by label). Services of other classes are left out,
// as the controller leaves them out of its rebuild.
func CheckServices(pools []v1alpha1.AddressPool, svcs []corev1.Service, class *string, nsLabels map[string]map[string]string) []Kept {
	resolved := addresspool.Resolve(pools)
	prov := baremetal.New(baremetal.Options{})
	alloc := baremetal.NewAllocator()
	svcs = slices.Clone(svcs)
	baremetal.SortOldestFirst(svcs)
	type owned struct {
		svc *corev1.Service
		lb  *providers.LoadBalancer
		err string
	}
	var mine []owned
	for i := range svcs {
		svc := &svcs[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		lb, errs := servicemodel.BuildLoadBalancer(svc, nil, prov.Capabilities(), prov.ParseOptions)
		if !sameClass(svc.Spec.LoadBalancerClass, class) {
			continue // not restored either: the controller restores only the Services it owns
		}
		o := owned{svc: svc, lb: lb}
		if len(errs) > 0 {
			o.err = "portico-controller would reject the Service: " + errs.ToAggregate().Error()
		} else {
			alloc.Restore(lb.Ref, lb.CurrentIPs, baremetal.RequestFor(lb, nsLabels[svc.Namespace]).Sharing)
		}
		mine = append(mine, o)
	}
	var out []Kept
	for _, o := range mine {
		k := Kept{Service: o.svc.Namespace + "/" + o.svc.Name}
		for _, in := range o.svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				k.Status = append(k.Status, in.IP)
			}
		}
		switch {
		case o.err != "":
			k.Problem = o.err
		case len(k.Status) == 0:
			// A Service MetalLB never served gets its first address from Portico: nothing to keep.
		default:
			ips, err := alloc.Assign(resolved, baremetal.RequestFor(o.lb, nsLabels[o.svc.Namespace]))
			if err != nil {
				k.Problem = "the allocator refuses it: " + err.Error()
				break
			}
			for _, ip := range ips {
				k.Portico = append(k.Portico, ip.String())
			}
			var outside []string
			for _, ip := range k.Status {
				if a, err := netip.ParseAddr(ip); err == nil && addresspool.Containing(resolved, a.Unmap()) == nil {
					outside = append(outside, ip)
				}
			}
			switch {
			case !slices.Equal(normalize(k.Status), k.Portico):
				k.Problem = fmt.Sprintf("portico-controller would report %s instead of %s", strings.Join(k.Portico, ","), strings.Join(k.Status, ","))
			case len(outside) > 0:
				// The allocator keeps an address no pool contains (a pool edit never takes one
				// away), but portico-agent announces only addresses of a pool.
				k.Problem = fmt.Sprintf("%s is in no converted pool: portico-controller keeps it but portico-agent does not announce it", strings.Join(outside, ","))
			}
		}
		out = append(out, k)
	}
	return out
}

func normalize(ips []string) []string {
	out := make([]string, 0, len(ips))
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			s = a.Unmap().String()
		}
		out = append(out, s)
	}
	return out
}

func sameClass(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// ReadServices lists every Service and the labels of every namespace.
func ReadServices(ctx context.Context, client kubernetes.Interface) ([]corev1.Service, map[string]map[string]string, error) {
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing services: %w", err)
	}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	labels := map[string]map[string]string{}
	for _, ns := range nss.Items {
		labels[ns.Name] = ns.Labels
	}
	return svcs.Items, labels, nil
}
