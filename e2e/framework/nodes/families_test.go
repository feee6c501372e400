package nodes

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
)

func TestFamilies(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	for _, tc := range []struct {
		in   []corev1.IPFamily
		want []corev1.IPFamily
	}{
		{nil, IPv4Only},
		{[]corev1.IPFamily{v4}, IPv4Only},
		{[]corev1.IPFamily{v4, v6}, DualStack},
		{[]corev1.IPFamily{v6, v4}, DualStackIPv6},
		{[]corev1.IPFamily{v6}, nil},
		{[]corev1.IPFamily{v4, v4}, nil},
		{[]corev1.IPFamily{"IPv5"}, nil},
	} {
		got, err := families(tc.in)
		if (err != nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
			t.Errorf("families(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestFamilyOrder: a dual-stack cluster's addresses, pod CIDRs and Service CIDRs come in its
// family order, and kube-dns lies in the primary Service CIDR, the tenth address as kubeadm
// picks it.
func TestFamilyOrder(t *testing.T) {
	ln := &netlab.Node{PodCIDR: netip.MustParsePrefix("198.19.1.0/24"), PodCIDR6: netip.MustParsePrefix("fd00:c613:0:1::/64")}
	ln.Addr, ln.Addr6 = netip.MustParseAddr("198.19.0.11"), netip.MustParseAddr("fd00:c613::11")
	for _, fams := range [][]corev1.IPFamily{IPv4Only, DualStack, DualStackIPv6} {
		c := &Cluster{families: fams}
		n := &Node{Lab: ln, families: fams}
		addrs, cidrs, svcs := n.Addrs(), n.PodCIDRs(), c.ServiceCIDRs()
		if len(addrs) != len(fams) || len(cidrs) != len(fams) || len(svcs) != len(fams) {
			t.Fatalf("%v: addresses %v, pod CIDRs %v, Service CIDRs %v", fams, addrs, cidrs, svcs)
		}
		for i, f := range fams {
			is6 := f == corev1.IPv6Protocol
			if addrs[i].Is6() != is6 || cidrs[i].Addr().Is6() != is6 || svcs[i].Addr().Is6() != is6 {
				t.Errorf("%v: position %d: %s, %s, %s", fams, i, addrs[i], cidrs[i], svcs[i])
			}
			if n.Addr(f) != addrs[i] {
				t.Errorf("%v: Addr(%s) = %s, want %s", fams, f, n.Addr(f), addrs[i])
			}
		}
		dns := c.DNSServiceIP()
		if !svcs[0].Contains(dns) {
			t.Errorf("%v: kube-dns %s outside the primary Service CIDR %s", fams, dns, svcs[0])
		}
		tenth := svcs[0].Masked().Addr()
		for range 10 {
			tenth = tenth.Next()
		}
		if dns != tenth {
			t.Errorf("%v: kube-dns %s, want the tenth address %s", fams, dns, tenth)
		}
	}
	if got := netip.MustParsePrefix(cluster.ServiceCIDR6); !got.Contains(DNSServiceIP6) {
		t.Errorf("DNSServiceIP6 %s outside %s", DNSServiceIP6, got)
	}
}
