package netfilter

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

func TestPrimaryIP(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "node1"},
		{Type: corev1.NodeExternalIP, Address: "198.19.0.200"},
		{Type: corev1.NodeExternalIP, Address: "fd00:c613::200"},
		{Type: corev1.NodeInternalIP, Address: "198.19.0.11"},
		{Type: corev1.NodeInternalIP, Address: "198.19.0.12"},
	}}}
	if ip, ok := primaryIP(node, rules.IPv4); !ok || ip.String() != "198.19.0.11" {
		t.Errorf("IPv4: %v %v, want the first InternalIP", ip, ok)
	}
	if ip, ok := primaryIP(node, rules.IPv6); !ok || ip.String() != "fd00:c613::200" {
		t.Errorf("IPv6: %v %v, want the ExternalIP (no InternalIP of the family)", ip, ok)
	}
	if _, ok := primaryIP(nil, rules.IPv4); ok {
		t.Error("no Node: want no primary IP")
	}
}
