package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BGPPeer is a BGP router that portico-agent peers with from the nodes it selects. Every
// selected node runs its own session (GoBGP inside portico-agent) and advertises the
// addresses of the AddressPools whose spec.announce.bgp selects this peer. Cluster-scoped.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bgpp,categories=portico
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.peerAddress`
// +kubebuilder:printcolumn:name="Peer ASN",type=integer,JSONPath=`.spec.peerASN`
// +kubebuilder:printcolumn:name="My ASN",type=integer,JSONPath=`.spec.myASN`
// +kubebuilder:printcolumn:name="BFD",type=boolean,JSONPath=`.spec.bfd.enabled`
// +kubebuilder:printcolumn:name="Sessions",type=string,JSONPath=`.status.nodes[*].session`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.status.nodes[*].node`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BGPPeerSpec   `json:"spec"`
	Status BGPPeerStatus `json:"status,omitempty"`
}

// BGPPeerSpec declares one BGP neighbour and how the nodes peer with it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.keepaliveTime) || duration(self.keepaliveTime) == duration('0s') || duration(self.keepaliveTime) < ((has(self.holdTime) && duration(self.holdTime) != duration('0s')) ? duration(self.holdTime) : duration('90s'))",fieldPath=".keepaliveTime",message="must be less than the hold time (holdTime, default 90s)"
// +kubebuilder:validation:XValidation:rule="!has(self.ebgpMultihopTTL) || self.ebgpMultihopTTL == 0 || self.peerASN != self.myASN",fieldPath=".ebgpMultihopTTL",message="only for eBGP peers (peerASN differs from myASN)"
// +kubebuilder:validation:XValidation:rule="!has(self.ebgpMultihopTTL) || self.ebgpMultihopTTL <= 1 || !has(self.bfd) || (has(self.bfd.enabled) && !self.bfd.enabled)",fieldPath=".ebgpMultihopTTL",message="BFD is single-hop: not with bfd enabled"
type BGPPeerSpec struct {
	// PeerAddress is the router's IPv4 or IPv6 address. An IPv4 peer carries IPv4 routes, an
	// IPv6 peer IPv6 routes (a dual-stack router is two BGPPeers).
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="not an IPv4 or IPv6 address (without a zone, not IPv4-mapped IPv6)"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || !ip(self).isUnspecified()",message="the unspecified address cannot be a peer"
	PeerAddress string `json:"peerAddress"`

	// PeerASN is the router's AS number: 1 to 4294967294 but 23456 (AS_TRANS) and 65535.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:XValidation:rule="self != 23456 && self != 65535 && self != 4294967295",message="is reserved: 23456 is AS_TRANS (RFC 6793), 65535 and 4294967295 are reserved by RFC 7300"
	PeerASN int64 `json:"peerASN"`

	// MyASN is the nodes' AS number on this session; equal to PeerASN makes it iBGP. The same
	// range as PeerASN.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:XValidation:rule="self != 23456 && self != 65535 && self != 4294967295",message="is reserved: 23456 is AS_TRANS (RFC 6793), 65535 and 4294967295 are reserved by RFC 7300"
	MyASN int64 `json:"myASN"`

	// Port is the router's TCP port.
	// +kubebuilder:default=179
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// HoldTime is the hold time the nodes offer (whole seconds, 0 or 3s to 65535s); default 90s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || (duration(self) >= duration('3s') && duration(self) <= duration('65535s'))",message="want 0 (the default, 90s) or 3s to 65535s"
	// +kubebuilder:validation:XValidation:rule="duration(self).getMilliseconds() % 1000 == 0",message="want whole seconds"
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`

	// KeepaliveTime is the keepalive interval (whole seconds, less than the hold time); default a
	// third of the hold time.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self).getMilliseconds() % 1000 == 0",message="want whole seconds"
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`

	// PasswordSecretRef names a Secret whose key holds the TCP MD5 password (RFC 2385). A
	// missing Secret or key is reported in status and the session is not started (or keeps its
	// last password). Agents watch the Secret (they need get, list and watch on it); changing
	// the password restarts the sessions with the new one.
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`

	// BFD runs single-hop BFD with the router, so that a dead link or node is detected in
	// about interval x multiplier instead of the hold time.
	// +optional
	BFD *BFDSettings `json:"bfd,omitempty"`

	// EBGPMultihopTTL allows an eBGP router that many hops away (not with BFD).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	EBGPMultihopTTL int32 `json:"ebgpMultihopTTL,omitempty"`

	// NodeSelector selects the nodes that peer with this router; empty means every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// SecretKeyRef names a key of a Secret.
type SecretKeyRef struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// Key in the Secret's data.
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// BFDSettings are a peer's BFD timers.
type BFDSettings struct {
	// Enabled turns BFD on.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// ReceiveInterval is the shortest interval between received BFD packets the nodes ask for.
	// +kubebuilder:default="300ms"
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('4294967295us')",message="want at most 4294967295us (BFD's 32-bit microsecond field)"
	ReceiveInterval *metav1.Duration `json:"receiveInterval,omitempty"`
	// TransmitInterval is the interval the nodes send at.
	// +kubebuilder:default="300ms"
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('4294967295us')",message="want at most 4294967295us (BFD's 32-bit microsecond field)"
	TransmitInterval *metav1.Duration `json:"transmitInterval,omitempty"`
	// Multiplier is how many missed intervals declare the router down.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +optional
	Multiplier int32 `json:"multiplier,omitempty"`
}

// BGPPeerStatus is what the agents observed: one entry per node that peers with the router,
// each written by that node's agent only.
type BGPPeerStatus struct {
	// Nodes holds each peering node's session and BFD state.
	// +optional
	// +listType=map
	// +listMapKey=node
	Nodes []BGPPeerNodeStatus `json:"nodes,omitempty"`
}

// BGPPeerNodeStatus is one node's view of its session with the peer.
type BGPPeerNodeStatus struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Session is the BGP session state (Idle, Connect, Active, OpenSent, OpenConfirm,
	// Established), or Invalid when the peer's configuration cannot be used.
	Session string `json:"session"`
	// BFD is the BFD state (Disabled, AdminDown, Down, Init, Up).
	// +optional
	BFD string `json:"bfd,omitempty"`
	// AdvertisedPrefixes counts the prefixes this node advertises to the peer.
	// +optional
	AdvertisedPrefixes int32 `json:"advertisedPrefixes,omitempty"`
	// Message explains a session that is not Established.
	// +optional
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Session last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// BGPPeerList is a list of BGPPeers.
//
// +kubebuilder:object:root=true
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}
