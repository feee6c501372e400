//go:build e2e

package nftables_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// TestSetFamilies (issue 31 item 8): a Proxier started for IPv4 writes table ip6 portico, with
// a dual-stack Service's IPv6 ClusterIP, at the first sync (even a partial one) after IPv6 is
// added, and deletes that table, leaving ip portico as it was, at the first sync after IPv6 is
// dropped.
func TestSetFamilies(t *testing.T) {
	ns := inNetns(t)
	s := newStore()
	web := s.service("web", "198.18.10.1", func(svc *corev1.Service) {
		svc.Spec.ClusterIPs = []string{"198.18.10.1", "fd00:c613:ff00::a"}
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}, "198.19.1.1")
	port, portName, proto, node := int32(8080), "http", corev1.ProtocolTCP, "node2"
	_ = s.slices.Update(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-v6", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"fd00:c613:0:1::1"}, NodeName: &node}},
	})
	p := nftables.New(nftables.Options{MasqueradeBit: 12, Families: []rules.Family{rules.IPv4}})
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	all, _ := s.Services()
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
		t.Fatal(err)
	}
	if out := nft(t, ns, "list", "tables"); strings.Contains(out, "ip6 portico") {
		t.Fatalf("IPv4 only, yet: %s", out)
	}
	ip4 := nft(t, ns, "list", "table", "ip", "portico")

	if err := p.SetFamilies([]rules.Family{rules.IPv4, rules.IPv6}); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Changed: nil, Store: s}); err != nil {
		t.Fatal(err)
	}
	if out := nft(t, ns, "list", "table", "ip6", "portico"); !strings.Contains(out, "fd00:c613:ff00::a . tcp . 80 : goto int-ns/web/tcp/http") {
		t.Errorf("table ip6 portico after IPv6 was added lacks the IPv6 ClusterIP:\n%s", out)
	}

	if err := p.SetFamilies([]rules.Family{rules.IPv4}); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Changed: []types.NamespacedName{web}, Store: s}); err != nil {
		t.Fatal(err)
	}
	if out := nft(t, ns, "list", "tables"); strings.Contains(out, "ip6 portico") || !strings.Contains(out, "ip portico") {
		t.Errorf("after IPv6 was dropped the tables are: %s", out)
	}
	if out := nft(t, ns, "list", "table", "ip", "portico"); out != ip4 {
		t.Errorf("table ip portico changed:\n%s\nwas:\n%s", out, ip4)
	}
	// The next full sync works on (the generation moved under the Proxier).
	if err := p.Sync(ctx, &tracker.State{NodeName: "node1", Full: true, Changed: all, Store: s}); err != nil {
		t.Fatal(err)
	}
}
