package metallb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group is MetalLB's API group.
const Group = "metallb.io"

// The kinds the converter reads, and the versions a cluster serves them at (BGPPeer's stored
// version is v1beta2; v1beta1 is deprecated but still read from files).
const (
	KindIPAddressPool    = "IPAddressPool"
	KindL2Advertisement  = "L2Advertisement"
	KindBGPAdvertisement = "BGPAdvertisement"
	KindBGPPeer          = "BGPPeer"
	KindCommunity        = "Community"
	KindBFDProfile       = "BFDProfile"
)

// statusKinds are MetalLB kinds that only report state; they carry nothing to convert.
var statusKinds = []string{"ServiceL2Status", "ServiceBGPStatus", "ConfigurationState"}

// meta is the part of an object's metadata the converter uses.
type meta struct {
	Name      string
	Namespace string
	Labels    map[string]string
	// Source says where the object was read ("pools.yaml #2", "cluster").
	Source string
}

// ref names an object in findings and errors: "IPAddressPool metallb-system/public".
func (m meta) ref(kind string) string {
	if m.Namespace == "" {
		return kind + " " + m.Name
	}
	return kind + " " + m.Namespace + "/" + m.Name
}

// IPAddressPool is MetalLB's pool of addresses.
type IPAddressPool struct {
	meta
	Spec struct {
		Addresses         []string           `json:"addresses"`
		AutoAssign        *bool              `json:"autoAssign,omitempty"`
		AvoidBuggyIPs     bool               `json:"avoidBuggyIPs,omitempty"`
		ServiceAllocation *serviceAllocation `json:"serviceAllocation,omitempty"`
	}
}

type serviceAllocation struct {
	Priority           int                    `json:"priority,omitempty"`
	Namespaces         []string               `json:"namespaces,omitempty"`
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`
	ServiceSelectors   []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
}

// poolSelection is how an advertisement picks its pools: by name, by label, or (neither) all.
type poolSelection struct {
	IPAddressPools         []string               `json:"ipAddressPools,omitempty"`
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors,omitempty"`
}

// L2Advertisement announces pools with ARP/NDP.
type L2Advertisement struct {
	meta
	Spec struct {
		poolSelection
		NodeSelectors    []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
		Interfaces       []string               `json:"interfaces,omitempty"`
		ServiceSelectors []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
	}
}

// BGPAdvertisement announces pools over BGP.
type BGPAdvertisement struct {
	meta
	Spec struct {
		poolSelection
		AggregationLength   *int32                 `json:"aggregationLength,omitempty"`
		AggregationLengthV6 *int32                 `json:"aggregationLengthV6,omitempty"`
		LocalPref           uint32                 `json:"localPref,omitempty"`
		Communities         []string               `json:"communities,omitempty"`
		NodeSelectors       []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
		Peers               []string               `json:"peers,omitempty"`
		ServiceSelectors    []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
	}
}

// BGPPeer is a BGP neighbour (the v1beta2 shape; v1beta1's fields are a subset of it).
type BGPPeer struct {
	meta
	Spec struct {
		MyASN                  uint32                 `json:"myASN"`
		PeerASN                uint32                 `json:"peerASN,omitempty"`
		LocalASN               uint32                 `json:"localASN,omitempty"`
		DynamicASN             string                 `json:"dynamicASN,omitempty"`
		PeerAddress            string                 `json:"peerAddress,omitempty"`
		Interface              string                 `json:"interface,omitempty"`
		SourceAddress          string                 `json:"sourceAddress,omitempty"`
		PeerPort               uint16                 `json:"peerPort,omitempty"`
		HoldTime               *metav1.Duration       `json:"holdTime,omitempty"`
		KeepaliveTime          *metav1.Duration       `json:"keepaliveTime,omitempty"`
		ConnectTime            *metav1.Duration       `json:"connectTime,omitempty"`
		RouterID               string                 `json:"routerID,omitempty"`
		NodeSelectors          []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
		Password               string                 `json:"password,omitempty"`
		PasswordSecret         *secretReference       `json:"passwordSecret,omitempty"`
		BFDProfile             string                 `json:"bfdProfile,omitempty"`
		EnableGracefulRestart  bool                   `json:"enableGracefulRestart,omitempty"`
		EBGPMultiHop           bool                   `json:"ebgpMultiHop,omitempty"`
		VRF                    string                 `json:"vrf,omitempty"`
		DisableMP              bool                   `json:"disableMP,omitempty"`
		DualStackAddressFamily bool                   `json:"dualStackAddressFamily,omitempty"`
	}
}

type secretReference struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Community declares aliases for BGP community values.
type Community struct {
	meta
	Spec struct {
		Communities []struct {
			Name  string `json:"name,omitempty"`
			Value string `json:"value,omitempty"`
		} `json:"communities,omitempty"`
	}
}

// BFDProfile holds BFD settings a BGPPeer refers to by name. Intervals are milliseconds.
type BFDProfile struct {
	meta
	Spec struct {
		ReceiveInterval  *uint32 `json:"receiveInterval,omitempty"`
		TransmitInterval *uint32 `json:"transmitInterval,omitempty"`
		DetectMultiplier *uint32 `json:"detectMultiplier,omitempty"`
		EchoInterval     *uint32 `json:"echoInterval,omitempty"`
		EchoMode         *bool   `json:"echoMode,omitempty"`
		PassiveMode      *bool   `json:"passiveMode,omitempty"`
		MinimumTTL       *uint32 `json:"minimumTtl,omitempty"`
	}
}

// Input is every MetalLB resource of one namespace the converter reads.
type Input struct {
	Pools       []IPAddressPool
	L2          []L2Advertisement
	BGP         []BGPAdvertisement
	Peers       []BGPPeer
	Communities []Community
	BFDProfiles []BFDProfile
	// Ignored lists objects read that are not converted (other kinds, status kinds, other
	// namespaces), for the report.
	Ignored []string
}

// Empty reports whether no MetalLB configuration was read.
func (in *Input) Empty() bool {
	return len(in.Pools)+len(in.L2)+len(in.BGP)+len(in.Peers)+len(in.Communities)+len(in.BFDProfiles) == 0
}

// Add decodes one object (as a YAML or JSON document decodes into a map) read from source
// into in when it is a MetalLB resource of namespace; other objects are listed in in.Ignored.
// An object in no namespace (a file that omits it) counts as namespace's. A MetalLB resource
// whose spec has a field the converter does not know, or a value of the wrong type, is an
// error: nothing is silently dropped.
func (in *Input) Add(obj map[string]any, namespace, source string) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, version, _ := strings.Cut(apiVersion, "/")
	md, _ := obj["metadata"].(map[string]any)
	m := meta{Source: source}
	m.Name, _ = md["name"].(string)
	m.Namespace, _ = md["namespace"].(string)
	if labels, ok := md["labels"].(map[string]any); ok {
		m.Labels = map[string]string{}
		for k, v := range labels {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%s: %s: label %q is not a string", source, m.ref(kind), k)
			}
			m.Labels[k] = s
		}
	}
	if group != Group {
		in.Ignored = append(in.Ignored, fmt.Sprintf("%s: %s %s (not a MetalLB resource)", source, apiVersion, m.ref(kind)))
		return nil
	}
	if version != "v1beta1" && version != "v1beta2" {
		return fmt.Errorf("%s: %s: version %s of MetalLB's API is not supported (v1beta1, v1beta2)", source, m.ref(kind), apiVersion)
	}
	if m.Name == "" {
		return fmt.Errorf("%s: %s without metadata.name", source, kind)
	}
	if m.Namespace == "" {
		m.Namespace = namespace
	}
	if m.Namespace != namespace {
		in.Ignored = append(in.Ignored, fmt.Sprintf("%s: %s (namespace %s is not %s)", source, m.ref(kind), m.Namespace, namespace))
		return nil
	}
	var err error
	switch kind {
	case KindIPAddressPool:
		var o IPAddressPool
		o.meta, err = m, decodeSpec(obj, &o.Spec)
		in.Pools = append(in.Pools, o)
	case KindL2Advertisement:
		var o L2Advertisement
		o.meta, err = m, decodeSpec(obj, &o.Spec)
		in.L2 = append(in.L2, o)
	case KindBGPAdvertisement:
		var o BGPAdvertisement
		o.meta, err = m, decodeSpec(obj, &o.Spec)
		in.BGP = append(in.BGP, o)
	case KindBGPPeer:
		var o BGPPeer
		o.meta, err = m, decodeSpec(obj, &o.Spec)
		in.Peers = append(in.Peers, o)
	case KindCommunity:
		var o Community
		o.meta, err = m, decodeSpec(obj, &o.Spec)
		in.Communities = append(in.Communities, o)
	case KindBFDProfile:
		var o BFDProfile
		o.meta, err = m, decodeSpec(obj, &o.Spec)
		in.BFDProfiles = append(in.BFDProfiles, o)
	default:
		why := "a MetalLB kind the converter does not know"
		for _, k := range statusKinds {
			if k == kind {
				why = "status only"
			}
		}
		in.Ignored = append(in.Ignored, fmt.Sprintf("%s: %s (%s)", source, m.ref(kind), why))
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", source, m.ref(kind), err)
	}
	return nil
}

// decodeSpec decodes obj["spec"] into out strictly.
func decodeSpec(obj map[string]any, out any) error {
	spec, ok := obj["spec"]
	if !ok || spec == nil {
		return nil
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding spec: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}

// sortInput orders every list by name, so that conversion and its report do not depend on the
// order objects were read in.
func sortInput(in *Input) {
	sort.Slice(in.Pools, func(i, j int) bool { return in.Pools[i].Name < in.Pools[j].Name })
	sort.Slice(in.L2, func(i, j int) bool { return in.L2[i].Name < in.L2[j].Name })
	sort.Slice(in.BGP, func(i, j int) bool { return in.BGP[i].Name < in.BGP[j].Name })
	sort.Slice(in.Peers, func(i, j int) bool { return in.Peers[i].Name < in.Peers[j].Name })
	sort.Slice(in.Communities, func(i, j int) bool { return in.Communities[i].Name < in.Communities[j].Name })
	sort.Slice(in.BFDProfiles, func(i, j int) bool { return in.BFDProfiles[i].Name < in.BFDProfiles[j].Name })
}
