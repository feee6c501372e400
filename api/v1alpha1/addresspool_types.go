package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddressPool is a set of addresses the bare-metal provider hands out to Services of type
// LoadBalancer, and how they are announced. Pools are cluster-scoped: a cluster admin declares
// them; serviceAllocation says which Services may use one.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ap;addrpool,categories=portico
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses`
// +kubebuilder:printcolumn:name="Auto-Assign",type=boolean,JSONPath=`.spec.autoAssign`
// +kubebuilder:printcolumn:name="Internal",type=boolean,JSONPath=`.spec.internal`,priority=1
// +kubebuilder:printcolumn:name="IPv4 Assigned",type=integer,JSONPath=`.status.ipv4.assigned`
// +kubebuilder:printcolumn:name="IPv4 Available",type=integer,JSONPath=`.status.ipv4.available`
// +kubebuilder:printcolumn:name="IPv6 Assigned",type=integer,JSONPath=`.status.ipv6.assigned`
// +kubebuilder:printcolumn:name="IPv6 Available",type=integer,JSONPath=`.status.ipv6.available`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddressPoolSpec   `json:"spec"`
	Status AddressPoolStatus `json:"status,omitempty"`
}

// AddressPoolSpec declares the addresses of a pool and who may use them.
type AddressPoolSpec struct {
	// Addresses are IPv4 and IPv6 CIDRs ("198.18.10.0/24", "2001:db8:10::/120") and inclusive
	// ranges of one family ("198.18.10.10-198.18.10.20"). Entries must not overlap each other,
	// nor another pool's (the younger pool of an overlapping pair is reported Conflict and not
	// used for new allocations). The API server refuses an entry that is not a CIDR or a range
	// (IPv4-mapped IPv6 and zones are refused too), a CIDR with host bits set, a range whose
	// ends differ in family or whose end is before its start; overlaps are reported in status.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=90
	// +kubebuilder:validation:items:XValidation:rule="self.contains('-') ? (self.split('-', 3).size() == 2 && isIP(self.split('-', 3)[0].trim()) && isIP(self.split('-', 3)[1].trim())) : isCIDR(self)",message="not a CIDR (198.18.10.0/24, 2001:db8:10::/120) or a range of two addresses (198.18.10.10-198.18.10.20)"
	// +kubebuilder:validation:items:XValidation:rule="self.contains('-') || !isCIDR(self) || cidr(self) == cidr(self).masked()",message="has host bits set: write the prefix with its first address (198.18.10.0/24, not 198.18.10.5/24)"
	// +kubebuilder:validation:items:XValidation:rule="!self.contains('-') || self.split('-', 3).size() != 2 || !isIP(self.split('-', 3)[0].trim()) || !isIP(self.split('-', 3)[1].trim()) || ip(self.split('-', 3)[0].trim()).family() == ip(self.split('-', 3)[1].trim()).family()",message="the two ends of a range must be of one family"
	// +kubebuilder:validation:items:XValidation:rule="!self.contains('-') || self.split('-', 3).size() != 2 || [self.split('-', 3)[0].trim()].all(a, [self.split('-', 3)[1].trim()].all(b, !isIP(a) || !isIP(b) || ip(a).family() != ip(b).family() || ip(a) == ip(b) || ['0/1', '1/2', '2/3', '3/4', '4/5', '5/6', '6/7', '7/8', '8/9', '9/10', '10/11', '11/12', '12/13', '13/14', '14/15', '15/16', '16/17', '17/18', '18/19', '19/20', '20/21', '21/22', '22/23', '23/24', '24/25', '25/26', '26/27', '27/28', '28/29', '29/30', '30/31', '31/32', '32/33', '33/34', '34/35', '35/36', '36/37', '37/38', '38/39', '39/40', '40/41', '41/42', '42/43', '43/44', '44/45', '45/46', '46/47', '47/48', '48/49', '49/50', '50/51', '51/52', '52/53', '53/54', '54/55', '55/56', '56/57', '57/58', '58/59', '59/60', '60/61', '61/62', '62/63', '63/64', '64/65', '65/66', '66/67', '67/68', '68/69', '69/70', '70/71', '71/72', '72/73', '73/74', '74/75', '75/76', '76/77', '77/78', '78/79', '79/80', '80/81', '81/82', '82/83', '83/84', '84/85', '85/86', '86/87', '87/88', '88/89', '89/90', '90/91', '91/92', '92/93', '93/94', '94/95', '95/96', '96/97', '97/98', '98/99', '99/100', '100/101', '101/102', '102/103', '103/104', '104/105', '105/106', '106/107', '107/108', '108/109', '109/110', '110/111', '111/112', '112/113', '113/114', '114/115', '115/116', '116/117', '117/118', '118/119', '119/120', '120/121', '121/122', '122/123', '123/124', '124/125', '125/126', '126/127', '127/128'].exists(p, [a + '/' + p.substring(0, p.indexOf('/'))].all(l, [a + '/' + p.substring(p.indexOf('/') + 1)].all(m, isCIDR(m) && cidr(l).containsIP(b) && !cidr(m).containsIP(b) && cidr(m).masked().ip() == cidr(l).masked().ip())))))",message="the end of a range must not be before its start"
	Addresses []string `json:"addresses"`

	// AutoAssign lets the pool serve Services that ask for no particular pool or address.
	// When false the pool only serves Services that name it (portico-lb.io/address-pool) or
	// request one of its addresses.
	// +kubebuilder:default=true
	// +optional
	AutoAssign *bool `json:"autoAssign,omitempty"`

	// AllowNetworkAndBroadcast hands out the first (network) and last (broadcast) address of
	// every IPv4 CIDR of the pool that is /30 or larger. By default they are never handed out,
	// since some clients and routers drop traffic to them. Ranges ("a-b") and IPv6 CIDRs are
	// used whole either way.
	// +optional
	AllowNetworkAndBroadcast bool `json:"allowNetworkAndBroadcast,omitempty"`

	// Internal marks the pool as internal: it serves only Services annotated
	// portico-lb.io/internal: "true", and such Services are served only by internal pools.
	// +optional
	Internal bool `json:"internal,omitempty"`

	// ServiceAllocation restricts the pool to some Services and orders it against other pools.
	// +optional
	ServiceAllocation *ServiceAllocation `json:"serviceAllocation,omitempty"`

	// Announce says how the pool's addresses are announced to the network.
	// +optional
	Announce Announce `json:"announce,omitempty"`
}

// ServiceAllocation restricts a pool to some Services and sets its priority.
type ServiceAllocation struct {
	// Priority orders the pools a Service may use: the lowest non-zero priority is tried first;
	// 0 (the default) is tried last. Ties are broken by pool name.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Priority int32 `json:"priority,omitempty"`

	// Namespaces the pool serves, by name. A Service qualifies when its namespace is listed
	// here or matches NamespaceSelector; when both are empty every namespace qualifies.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects the namespaces the pool serves by their labels.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ServiceSelector selects the Services the pool serves by their labels; empty selects all.
	// +optional
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`
}

// Announce says how a pool's addresses are announced.
type Announce struct {
	// L2 announces each address from one node with ARP (IPv4) and NDP (IPv6).
	// +optional
	L2 *L2Announce `json:"l2,omitempty"`

	// BGP advertises each address as a /32 or /128 route from the eligible nodes to the
	// selected BGPPeers. L2 and BGP may both be set.
	// +optional
	BGP *BGPAnnounce `json:"bgp,omitempty"`
}

// L2Announce selects the nodes and interfaces that may answer ARP/NDP for the pool's addresses.
type L2Announce struct {
	// NodeSelector limits the candidate announcing nodes; empty means every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Interfaces limits announcement to these interface names on the node; empty means the
	// interfaces that hold an address in the same subnet as the announced address. Names are
	// Linux interface names: 1 to 15 characters, no "/", ":" or white space, not "." or "..".
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=15
	// +kubebuilder:validation:items:Pattern=`^[^/:\s]+$`
	// +kubebuilder:validation:items:XValidation:rule="self != '.' && self != '..'",message="not an interface name"
	Interfaces []string `json:"interfaces,omitempty"`
}

// BGPAnnounce says to which BGP peers a pool's addresses are advertised, and with which
// attributes. An empty BGPAnnounce ({}) advertises to every BGPPeer that selects the node.
type BGPAnnounce struct {
	// Peers names the BGPPeers to advertise to (as MetalLB's BGPAdvertisement peers). A peer
	// qualifies when it is named here or matches PeerSelector; when both are empty every BGPPeer
	// qualifies. Each node advertises the pool's addresses only to those of its own sessions
	// whose BGPPeer qualifies; its other sessions do not carry them. A name no BGPPeer has, or
	// a selection that matches no BGPPeer, makes BGPValid False (with an Event) and agents keep
	// advertising with the pool's last valid settings.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Peers []string `json:"peers,omitempty"`

	// PeerSelector selects the BGPPeers to advertise to by their labels (see Peers).
	// +optional
	PeerSelector *metav1.LabelSelector `json:"peerSelector,omitempty"`

	// NodeSelector limits the nodes that advertise the pool's addresses; empty means every
	// eligible node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Communities are standard BGP communities ("ASN:VALUE", each 0-65535) attached to every
	// route of the pool.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=11
	// +kubebuilder:validation:items:Pattern=`^[0-9]{1,5}:[0-9]{1,5}$`
	// +kubebuilder:validation:items:XValidation:rule="self.split(':', 2).all(p, int(p) <= 65535)",message="want ASN:VALUE, each 0 to 65535"
	Communities []string `json:"communities,omitempty"`

	// LargeCommunities are BGP large communities ("ASN:DATA1:DATA2", each 32 bits) attached to
	// every route of the pool.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$`
	// +kubebuilder:validation:items:XValidation:rule="self.split(':', 3).all(p, int(p) <= 4294967295)",message="want ASN:DATA1:DATA2, each 0 to 4294967295"
	LargeCommunities []string `json:"largeCommunities,omitempty"`

	// LocalPreference is sent as LOCAL_PREF; it only matters to iBGP peers.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	LocalPreference *int64 `json:"localPreference,omitempty"`

	// AggregationLength is the prefix length IPv4 addresses are advertised with (default 32):
	// a shorter length advertises the covering prefix once instead of each address.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	AggregationLength *int32 `json:"aggregationLength,omitempty"`

	// AggregationLengthV6 is the prefix length IPv6 addresses are advertised with (default 128).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	AggregationLengthV6 *int32 `json:"aggregationLengthV6,omitempty"`
}

// Condition types of an AddressPool.
const (
	// ConditionValid is True when the pool's spec is well formed, False with the problems
	// otherwise. An invalid pool serves no new allocation; Services keep addresses they hold.
	ConditionValid = "Valid"
	// ConditionConflict is True when the pool overlaps an older pool; it then serves no new
	// allocation. Services keep addresses they hold.
	ConditionConflict = "Conflict"
	// ConditionBGPValid is present when the pool has BGP settings: True when they are well
	// formed, False with the problems otherwise. Agents keep advertising the pool's addresses
	// with its last valid settings (or not at all if it never had any).
	ConditionBGPValid = "BGPValid"
)

// AddressPoolStatus is what the controller observed about a pool.
type AddressPoolStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// IPv4 usage; absent when the pool has no IPv4 address.
	// +optional
	IPv4 *FamilyUsage `json:"ipv4,omitempty"`
	// IPv6 usage; absent when the pool has no IPv6 address.
	// +optional
	IPv6 *FamilyUsage `json:"ipv6,omitempty"`
	// Conditions: Valid, Conflict and, with BGP settings, BGPValid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FamilyUsage counts a pool's addresses of one family. Counts saturate at 2^63-1 (large IPv6
// pools).
type FamilyUsage struct {
	// Assigned is how many of the pool's addresses Services hold.
	Assigned int64 `json:"assigned"`
	// Available is how many more addresses can be handed out.
	Available int64 `json:"available"`
}

// AddressPoolList is a list of AddressPools.
//
// +kubebuilder:object:root=true
type AddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressPool `json:"items"`
}
