package nodes

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/e2e/framework/cluster"
)

// DNSServiceIP6 is the kube-dns Service's ClusterIP in a cluster whose primary family is IPv6:
// the tenth address of cluster.ServiceCIDR6, as DNSServiceIP is of cluster.ServiceCIDR.
var DNSServiceIP6 = netip.MustParseAddr("fd00:c613:ff00::a")

// The IP family choices of Options.IPFamilies.
var (
	// IPv4Only is the default: one family, the lab's IPv4.
	IPv4Only = []corev1.IPFamily{corev1.IPv4Protocol}
	// DualStack is dual-stack with IPv4 primary.
	DualStack = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	// DualStackIPv6 is dual-stack with IPv6 primary: the kubernetes Service, new Services
	// without ipFamilies, each pod's first IP and each node's first InternalIP are IPv6.
	DualStackIPv6 = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
)

// families checks Options.IPFamilies: nil means IPv4Only. The lab always carries IPv4, so a
// cluster is IPv4-only or dual-stack in either order.
func families(fams []corev1.IPFamily) ([]corev1.IPFamily, error) {
	if len(fams) == 0 {
		return IPv4Only, nil
	}
	for _, ok := range [][]corev1.IPFamily{IPv4Only, DualStack, DualStackIPv6} {
		if slices.Equal(fams, ok) {
			return ok, nil
		}
	}
	return nil, fmt.Errorf("IP families %v: want [IPv4], [IPv4 IPv6] or [IPv6 IPv4] (the lab always carries IPv4)", fams)
}

// IPFamilies are the cluster's IP families, the primary first.
func (c *Cluster) IPFamilies() []corev1.IPFamily { return c.families }

// DualStack reports whether the cluster has both families.
func (c *Cluster) DualStack() bool { return len(c.families) == 2 }

// PrimaryFamily is the family of the kubernetes Service and of Services that ask for none.
func (c *Cluster) PrimaryFamily() corev1.IPFamily { return c.families[0] }

// DNSServiceIP is the kube-dns Service's ClusterIP (Options.DNS) and the kubelets'
// clusterDNS: DNSServiceIP or DNSServiceIP6, in the primary family.
func (c *Cluster) DNSServiceIP() netip.Addr {
	if c.PrimaryFamily() == corev1.IPv6Protocol {
		return DNSServiceIP6
	}
	return DNSServiceIP
}

// ServiceCIDRs are the apiserver's ClusterIP ranges, the primary family's first.
func (c *Cluster) ServiceCIDRs() []netip.Prefix {
	var ps []netip.Prefix
	for _, f := range c.families {
		cidr := cluster.ServiceCIDR
		if f == corev1.IPv6Protocol {
			cidr = cluster.ServiceCIDR6
		}
		ps = append(ps, netip.MustParsePrefix(cidr))
	}
	return ps
}

// RootAddr is the root namespace's LAN address of family f (the apiserver listens on the
// primary family's).
func (c *Cluster) RootAddr(f corev1.IPFamily) netip.Addr {
	if f == corev1.IPv6Protocol {
		return c.Lab.RootAddr6()
	}
	return c.Lab.RootAddr()
}

// Addrs are the node's InternalIPs (kubelet --node-ip), in the cluster's family order.
func (n *Node) Addrs() []netip.Addr {
	return inFamilyOrder(n.families, n.Lab.Addr, n.Lab.Addr6)
}

// Addr is the node's InternalIP of family f, or the zero Addr.
func (n *Node) Addr(f corev1.IPFamily) netip.Addr {
	for _, a := range n.Addrs() {
		if a.Is6() == (f == corev1.IPv6Protocol) {
			return a
		}
	}
	return netip.Addr{}
}

// PodCIDRs are the node's pod CIDRs (Node.spec.podCIDRs), in the cluster's family order: the
// lab's, which every other LAN host routes via the node.
func (n *Node) PodCIDRs() []netip.Prefix {
	return inFamilyOrder(n.families, n.Lab.PodCIDR, n.Lab.PodCIDR6)
}

// inFamilyOrder is v4 and v6, one per family of families, in their order.
func inFamilyOrder[T any](families []corev1.IPFamily, v4, v6 T) []T {
	var out []T
	for _, f := range families {
		if f == corev1.IPv6Protocol {
			out = append(out, v6)
		} else {
			out = append(out, v4)
		}
	}
	return out
}

func joinAddrs[T fmt.Stringer](xs []T) string {
	var ss []string
	for _, x := range xs {
		ss = append(ss, x.String())
	}
	return strings.Join(ss, ",")
}
