package netfilter

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

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

// NodePortAddresses are the addresses of family NodePorts answer on when --nodeport-addresses
// restricts them: the local addresses inside cidrs and, with primary, node's primary IP. Both
// dataplanes (this one and package nftables) use it.
func NodePortAddresses(family rules.Family, cidrs []netip.Prefix, primary bool, node *corev1.Node) ([]netip.Addr, error) {
	addrs, err := localAddresses(family, cidrs)
	if err != nil {
		return nil, err
	}
	if primary {
		if ip, ok := primaryIP(node, family); ok && !slices.Contains(addrs, ip) {
			addrs = append(addrs, ip)
		}
	}
	return addrs, nil
}
