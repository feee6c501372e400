package addresspool

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// BGPSettings is a pool's spec.announce.bgp, parsed. The controller reports its problems in
// the pool's status; portico-agent advertises with it.
type BGPSettings struct {
	// Peers and PeerSelector choose the BGPPeers (see PeerSelected).
	Peers        []string
	PeerSelector labels.Selector
	// NodeSelector chooses the advertising nodes (nil: every node).
	NodeSelector labels.Selector
	// Communities are standard communities, each ASN<<16 | value.
	Communities []uint32
	// LargeCommunities are large communities, each {ASN, Data1, Data2}.
	LargeCommunities [][3]uint32
	// LocalPref is LOCAL_PREF (0: not sent).
	LocalPref uint32
	// AggregationLength and AggregationLengthV6 are the advertised prefix lengths.
	AggregationLength, AggregationLengthV6 int
}

// PeerSelected reports whether the pool advertises to the BGPPeer named name with labels lbls:
// it is named in Peers or matches PeerSelector, or neither is set.
func (b *BGPSettings) PeerSelected(name string, lbls map[string]string) bool {
	if len(b.Peers) == 0 && b.PeerSelector == nil {
		return true
	}
	for _, p := range b.Peers {
		if p == name {
			return true
		}
	}
	return b.PeerSelector != nil && b.PeerSelector.Matches(labels.Set(lbls))
}

// CheckPeers reports a peer selection that cannot be what the user meant, given every
// BGPPeer of the cluster (name -> labels): a name in Peers that no BGPPeer has, and a selection
// (Peers or PeerSelector) that matches no BGPPeer at all. The controller reports the problems
// in the pool's BGPValid condition and agents treat them as invalid settings: they keep
// advertising with the last valid ones, so a typo withdraws nothing. An empty selection (every
// BGPPeer) is never a problem, even with no BGPPeer yet.
func (b *BGPSettings) CheckPeers(peers map[string]map[string]string) field.ErrorList {
	if len(b.Peers) == 0 && b.PeerSelector == nil {
		return nil
	}
	path := field.NewPath("spec", "announce", "bgp")
	var errs field.ErrorList
	for i, name := range b.Peers {
		if _, ok := peers[name]; !ok {
			errs = append(errs, field.NotFound(path.Child("peers").Index(i), name))
		}
	}
	for name, lbls := range peers {
		if b.PeerSelected(name, lbls) {
			return errs
		}
	}
	var sel []string
	if len(b.Peers) > 0 {
		sel = append(sel, "peers ["+strings.Join(b.Peers, ", ")+"]")
	}
	if b.PeerSelector != nil {
		sel = append(sel, "peerSelector {"+b.PeerSelector.String()+"}")
	}
	return append(errs, field.Invalid(path, strings.Join(sel, " and "), "selects no BGPPeer: the pool would be advertised to no router"))
}

// ParseBGP parses a pool's BGP settings; nil settings when the pool has none. Every problem is
// returned with its path under spec.announce.bgp.
func ParseBGP(ap *v1alpha1.AddressPool) (*BGPSettings, field.ErrorList) {
	in := ap.Spec.Announce.BGP
	if in == nil {
		return nil, nil
	}
	path := field.NewPath("spec", "announce", "bgp")
	var errs field.ErrorList
	out := &BGPSettings{Peers: in.Peers, AggregationLength: 32, AggregationLengthV6: 128}
	var err error
	if in.PeerSelector != nil {
		if out.PeerSelector, err = metav1.LabelSelectorAsSelector(in.PeerSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("peerSelector"), in.PeerSelector, err.Error()))
		}
	}
	if in.NodeSelector != nil {
		if out.NodeSelector, err = metav1.LabelSelectorAsSelector(in.NodeSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("nodeSelector"), in.NodeSelector, err.Error()))
		}
	}
	for i, c := range in.Communities {
		v, err := parseCommunity(c)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("communities").Index(i), c, err.Error()))
			continue
		}
		out.Communities = append(out.Communities, v)
	}
	for i, c := range in.LargeCommunities {
		v, err := parseLargeCommunity(c)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("largeCommunities").Index(i), c, err.Error()))
			continue
		}
		out.LargeCommunities = append(out.LargeCommunities, v)
	}
	if lp := in.LocalPreference; lp != nil {
		if *lp < 0 || *lp > 1<<32-1 {
			errs = append(errs, field.Invalid(path.Child("localPreference"), *lp, "want 0 to 4294967295"))
		} else {
			out.LocalPref = uint32(*lp)
		}
	}
	if l := in.AggregationLength; l != nil {
		if *l < 0 || *l > 32 {
			errs = append(errs, field.Invalid(path.Child("aggregationLength"), *l, "want 0 to 32"))
		} else {
			out.AggregationLength = int(*l)
		}
	}
	if l := in.AggregationLengthV6; l != nil {
		if *l < 0 || *l > 128 {
			errs = append(errs, field.Invalid(path.Child("aggregationLengthV6"), *l, "want 0 to 128"))
		} else {
			out.AggregationLengthV6 = int(*l)
		}
	}
	return out, errs
}

// parseCommunity parses "ASN:VALUE" (each 0-65535).
func parseCommunity(s string) (uint32, error) {
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("want ASN:VALUE")
	}
	a, err1 := strconv.ParseUint(hi, 10, 16)
	v, err2 := strconv.ParseUint(lo, 10, 16)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("want ASN:VALUE, each 0 to 65535")
	}
	return uint32(a)<<16 | uint32(v), nil
}

// parseLargeCommunity parses "ASN:DATA1:DATA2" (each 32 bits).
func parseLargeCommunity(s string) ([3]uint32, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return [3]uint32{}, fmt.Errorf("want ASN:DATA1:DATA2")
	}
	var v [3]uint32
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return [3]uint32{}, fmt.Errorf("want ASN:DATA1:DATA2, each 0 to 4294967295")
		}
		v[i] = uint32(n)
	}
	return v, nil
}
