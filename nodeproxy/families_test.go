package nodeproxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/netfilter/netfiltertest"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// TestNextFamilies: the families follow the Node's addresses; a Node without any keeps them;
// a family goes only when the Node has no address of it and no local endpoint uses it.
func TestNextFamilies(t *testing.T) {
	v4, v6, both := []rules.Family{rules.IPv4}, []rules.Family{rules.IPv6}, []rules.Family{rules.IPv4, rules.IPv6}
	for _, tc := range []struct {
		name             string
		have, node, want []rules.Family
		inUse            bool
	}{
		{name: "IPv6 address added", have: v4, node: both, want: both},
		{name: "IPv6-only Node after the IPv4 default", have: v4, node: v6, want: v6},
		{name: "no address (transient update)", have: both, node: nil, want: both},
		{name: "IPv6 addresses gone, no local IPv6 endpoint", have: both, node: v4, want: v4},
		{name: "IPv6 addresses gone, a local pod still uses IPv6", have: both, node: v4, inUse: true, want: both},
		{name: "unchanged", have: both, node: both, want: both},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextFamilies(tc.have, tc.node, func(rules.Family) bool { return tc.inUse })
			if !slices.Equal(got, tc.want) {
				t.Errorf("nextFamilies(%v, %v, inUse=%v) = %v, want %v", tc.have, tc.node, tc.inUse, got, tc.want)
			}
		})
	}
}

// TestFollowNodeFamilies: the real iptables-mode Proxier (over the fake seam), started for an
// IPv4-only Node, programs a dual-stack Service's IPv6 side once the Node gains an IPv6
// address, keeps it through an update without addresses and while a pod here has an IPv6
// endpoint, and removes the IPv6 chains once the Node has no IPv6 address and no local IPv6
// endpoint remains.
func TestFollowNodeFamilies(t *testing.T) {
	ctx := context.Background()
	ip4, ip6 := netfiltertest.New(), netfiltertest.New()
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	eps := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{tracker.SliceServiceIndex: tracker.SliceServiceKey})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	store := tracker.NewCacheStore("node1", services, eps, nodes)
	setNode := func(addrs ...string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		_ = nodes.Update(n)
	}
	_ = services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "198.18.0.10", ClusterIPs: []string{"198.18.0.10", "fd00:c613:ff00::10"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	slice := func(typ discoveryv1.AddressType, ep, node string) {
		port, portName, proto := int32(8080), "http", corev1.ProtocolTCP
		_ = eps.Update(&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-" + strings.ToLower(string(typ)), Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: typ,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ep}, NodeName: &node}},
		})
	}
	slice(discoveryv1.AddressTypeIPv4, "198.19.1.2", "node1")
	slice(discoveryv1.AddressTypeIPv6, "fd00:c613:0:1::2", "node1")

	p := netfilter.New(netfilter.Options{MasqueradeBit: 12, Netfilters: map[rules.Family]netfilter.Netfilter{rules.IPv4: ip4},
		NewNetfilter: func(f rules.Family) (netfilter.Netfilter, error) {
			if f != rules.IPv6 {
				t.Fatalf("NewNetfilter(%v)", f)
			}
			return ip6, nil
		}})
	var forgotten []rules.Family
	d := &followNode{dataplane: p, forget: func(f rules.Family) { forgotten = append(forgotten, f) }}
	fullSync := func() {
		t.Helper()
		st, err := tracker.NewState(store, "node1", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(logr.NewContext(ctx, logr.Discard()), st); err != nil {
			t.Fatal(err)
		}
	}
	programs6 := func() bool {
		saved, err := ip6.Save(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, chains := range saved.OwnedChains() {
			if len(chains) > 0 {
				return true
			}
		}
		return false
	}
	check := func(when string, want []rules.Family, want6 bool) {
		t.Helper()
		if got := p.Families(); !slices.Equal(got, want) {
			t.Errorf("%s: families %v, want %v", when, got, want)
		}
		if got := programs6(); got != want6 {
			t.Errorf("%s: IPv6 chains in the kernel: %v, want %v", when, got, want6)
		}
	}

	setNode("198.19.0.11")
	fullSync()
	check("IPv4-only Node", []rules.Family{rules.IPv4}, false)

	setNode("198.19.0.11", "fd00:c613::11")
	fullSync()
	check("IPv6 address added", []rules.Family{rules.IPv4, rules.IPv6}, true)
	if len(ip6.Restores) == 0 || !strings.Contains(string(ip6.Restores[0]), "fd00:c613:0:1::2") {
		t.Errorf("the IPv6 restore does not send to the IPv6 endpoint: %q", ip6.Restores)
	}

	setNode()
	fullSync()
	check("Node update without addresses", []rules.Family{rules.IPv4, rules.IPv6}, true)

	setNode("198.19.0.11")
	fullSync()
	check("IPv6 address gone, IPv6 endpoint here", []rules.Family{rules.IPv4, rules.IPv6}, true)
	if len(forgotten) != 0 {
		t.Errorf("families forgotten while kept: %v", forgotten)
	}

	slice(discoveryv1.AddressTypeIPv6, "fd00:c613:0:2::2", "node2")
	fullSync()
	check("IPv6 address gone, no IPv6 endpoint here", []rules.Family{rules.IPv4}, false)
	if !slices.Equal(forgotten, []rules.Family{rules.IPv6}) {
		t.Errorf("families forgotten %v, want IPv6", forgotten)
	}
	if rs, _ := ip4.Chain(rules.TableNAT, "PTC-SERVICES"); len(rs) == 0 {
		t.Errorf("the IPv4 rules went with the IPv6 ones")
	}
}
