package rules

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Family is the IP family one Builder renders for: iptables-restore or ip6tables-restore input.
type Family int

// The families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// Contains reports whether a is an address of this family.
func (f Family) Contains(a netip.Addr) bool {
	return a.IsValid() && (a.Is4() || a.Is4In6()) == (f == IPv4)
}

// Endpoint is one backend of a ServicePort, as an EndpointSlice reports it.
type Endpoint struct {
	IP   netip.Addr
	Port uint16
	// Ready, Serving and Terminating are the EndpointSlice conditions.
	Ready, Serving, Terminating bool
	// Local is true when the endpoint runs on this node.
	Local bool
	// OtherTopology is true for a ready endpoint that topology hints reserve for other nodes or
	// zones: cluster-wide traffic from this node does not go to it.
	OtherTopology bool
}

func (e Endpoint) String() string { return netip.AddrPortFrom(e.IP, e.Port).String() }

// ServicePort is one port of one Service, with the addresses of one family that reach it and its
// endpoints of that family. It is the unit the renderer works on.
type ServicePort struct {
	Namespace, Name string
	// PortName is the Service port's name ("" for a single unnamed port).
	PortName string
	// Protocol is "tcp", "udp" or "sctp".
	Protocol string
	// ClusterIP of this family; the zero Addr for a headless Service.
	ClusterIP netip.Addr
	Port      uint16
	// NodePort is 0 when the Service has none.
	NodePort        uint16
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// SourceRanges restrict the LoadBalancerIPs (loadBalancerSourceRanges); empty allows all
	// unless SourceRangesInvalid.
	SourceRanges []netip.Prefix
	// SourceRangesInvalid is set when the Service's source ranges are invalid: no source may
	// reach the LoadBalancerIPs (never a part of the ranges, never everyone).
	SourceRangesInvalid bool
	// ExternalLocal is externalTrafficPolicy: Local; InternalLocal is internalTrafficPolicy: Local.
	ExternalLocal, InternalLocal bool
	// AffinitySeconds is the ClientIP session affinity timeout; 0 means no affinity.
	AffinitySeconds int
	// HealthCheckNodePort is served by the agent for ExternalLocal Services (0: none).
	HealthCheckNodePort uint16
	Endpoints           []Endpoint
}

// Key identifies the service port: "namespace/name:portName/protocol". Chain and affinity-list
// names are hashed from it.
func (sp *ServicePort) Key() string {
	return fmt.Sprintf("%s/%s:%s/%s", sp.Namespace, sp.Name, sp.PortName, sp.Protocol)
}

// ClusterEndpoints are the endpoints cluster-wide traffic goes to: the ready ones that topology
// hints leave to this node, or, when there are none, those still serving while terminating
// (ProxyTerminatingEndpoints). Sorted.
func (sp *ServicePort) ClusterEndpoints() []Endpoint {
	return usable(sp.Endpoints, func(e Endpoint) bool { return !e.OtherTopology })
}

// LocalEndpoints are ClusterEndpoints' counterpart among this node's endpoints.
func (sp *ServicePort) LocalEndpoints() []Endpoint {
	return usable(sp.Endpoints, func(e Endpoint) bool { return e.Local })
}

// LocalReadyCount is the number of distinct ready local endpoint IPs: what the health check
// reports as localEndpoints.
func (sp *ServicePort) LocalReadyCount() int {
	seen := map[netip.Addr]bool{}
	for _, e := range sp.Endpoints {
		if e.Local && e.Ready {
			seen[e.IP] = true
		}
	}
	return len(seen)
}

func usable(all []Endpoint, keep func(Endpoint) bool) []Endpoint {
	var ready, terminating []Endpoint
	for _, e := range all {
		if !keep(e) {
			continue
		}
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	out := ready
	if len(out) == 0 {
		out = terminating
	}
	out = slices.Clone(out)
	slices.SortFunc(out, func(a, b Endpoint) int {
		return cmp.Or(a.IP.Compare(b.IP), cmp.Compare(a.Port, b.Port))
	})
	return slices.CompactFunc(out, func(a, b Endpoint) bool { return a.IP == b.IP && a.Port == b.Port })
}

// Config is what the renderer needs to know about the node and the agent's settings, for one
// family.
type Config struct {
	Family Family
	// MasqueradeMark is the single fwmark bit that asks PTC-POSTROUTING to masquerade.
	MasqueradeMark uint32
	// MasqueradeAll masquerades every packet sent to a ClusterIP.
	MasqueradeAll bool
	// ClusterCIDRs hold the pod addresses of this family. Traffic to a ClusterIP from outside them
	// is masqueraded; traffic from inside them to an externalTrafficPolicy: Local destination is
	// sent to any endpoint cluster-wide (the "short-circuit"). Empty disables both.
	ClusterCIDRs []netip.Prefix
	// NodePortsRestricted makes NodePorts answer on NodePortAddresses only (none when it is
	// empty); otherwise they answer on every local address except loopback.
	NodePortsRestricted bool
	// NodePortAddresses are the node addresses NodePorts answer on when NodePortsRestricted.
	NodePortAddresses []netip.Addr
}
