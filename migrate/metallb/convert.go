package metallb

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
)

// MigratedFrom is the annotation the converter puts on every object it writes: the MetalLB
// resource it was converted from.
const MigratedFrom = "portico-lb.io/migrated-from"

// multihopTTL is the TTL a MetalLB eBGP multi-hop session gets (FRR's ebgp-multihop without a
// count allows 255 hops).
const multihopTTL = 255

// Finding is one thing of the input that has no exact equivalent in Portico.
type Finding struct {
	// Object is the MetalLB resource ("IPAddressPool metallb-system/public").
	Object string
	// Field is the field path in that resource ("spec.serviceAllocation.serviceSelectors").
	Field string
	// Lossy means the converted objects behave differently from the MetalLB resource for some
	// Services or routes; the command writes nothing with a lossy finding unless told to.
	// Otherwise the finding is a note (a documented difference that changes nothing in use).
	Lossy bool
	// Message says what differs and what the converted object does instead.
	Message string
}

func (f Finding) String() string {
	level := "note"
	if f.Lossy {
		level = "LOSSY"
	}
	return fmt.Sprintf("%-5s %s %s: %s", level, f.Object, f.Field, f.Message)
}

// Result is the conversion of one Input.
type Result struct {
	Pools    []v1alpha1.AddressPool
	Peers    []v1alpha1.BGPPeer
	Findings []Finding
}

// Lossy reports whether any finding is lossy.
func (r *Result) Lossy() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Lossy })
}

// InputError lists every problem that makes an input impossible to convert.
type InputError struct{ Problems []string }

func (e *InputError) Error() string {
	return "the MetalLB configuration cannot be converted:\n  " + strings.Join(e.Problems, "\n  ")
}

// converter accumulates one conversion's findings and problems.
type converter struct {
	in       *Input
	findings []Finding
	problems []string
}

func (c *converter) note(obj, field, format string, args ...any) {
	c.findings = append(c.findings, Finding{Object: obj, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *converter) lossy(obj, field, format string, args ...any) {
	c.findings = append(c.findings, Finding{Object: obj, Field: field, Lossy: true, Message: fmt.Sprintf(format, args...)})
}

func (c *converter) bad(obj, field, format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf("%s %s: %s", obj, field, fmt.Sprintf(format, args...)))
}

// Convert turns MetalLB's resources into Portico AddressPools (one per IPAddressPool, with
// the announcement of the L2 and BGP advertisements that select it) and BGPPeers (one per
// BGPPeer), with a finding for everything that has no exact equivalent. It is pure. An input
// that cannot be converted (a malformed address, an unknown community alias or BFD profile, two
// pools that overlap) returns an *InputError listing every problem, and no result.
func Convert(in Input) (*Result, error) {
	sortInput(&in)
	c := &converter{in: &in}
	res := &Result{}
	for i := range in.Pools {
		res.Pools = append(res.Pools, c.pool(&in.Pools[i]))
	}
	c.l2(res.Pools)
	c.bgp(res.Pools)
	for i := range in.Peers {
		if p, ok := c.peer(&in.Peers[i], res.Pools); ok {
			res.Peers = append(res.Peers, p)
		}
	}
	c.checkPools(res.Pools)
	if len(c.problems) > 0 {
		return nil, &InputError{Problems: c.problems}
	}
	res.Findings = c.findings
	return res, nil
}

func objectMeta(m meta, apiKind string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        m.Name,
		Annotations: map[string]string{MigratedFrom: Group + " " + m.ref(apiKind)},
	}
}

func (c *converter) pool(mp *IPAddressPool) v1alpha1.AddressPool {
	obj := mp.ref(KindIPAddressPool)
	out := v1alpha1.AddressPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AddressPool"},
		ObjectMeta: objectMeta(mp.meta, KindIPAddressPool),
	}
	if msgs := validation.IsDNS1123Subdomain(mp.Name); len(msgs) > 0 {
		c.bad(obj, "metadata.name", "not a valid AddressPool name: %s", strings.Join(msgs, "; "))
	}
	if len(mp.Spec.Addresses) == 0 {
		c.bad(obj, "spec.addresses", "a pool needs at least one CIDR or range")
	}
	for i, entry := range mp.Spec.Addresses {
		norm, err := normalizeAddresses(entry)
		if err != nil {
			c.bad(obj, fmt.Sprintf("spec.addresses[%d]", i), "%q: %v", entry, err)
			continue
		}
		out.Spec.Addresses = append(out.Spec.Addresses, norm)
	}
	out.Spec.AutoAssign = mp.Spec.AutoAssign
	// MetalLB hands out every address of a pool unless avoidBuggyIPs; Portico keeps the first
	// and last of each IPv4 CIDR back unless allowNetworkAndBroadcast.
	out.Spec.AllowNetworkAndBroadcast = !mp.Spec.AvoidBuggyIPs
	if mp.Spec.AvoidBuggyIPs {
		c.buggyIPs(obj, out.Spec.Addresses)
	}
	if sa := mp.Spec.ServiceAllocation; sa != nil {
		path := "spec.serviceAllocation"
		if sa.Priority < 0 {
			c.bad(obj, path+".priority", "must not be negative, is %d", sa.Priority)
		}
		out.Spec.ServiceAllocation = &v1alpha1.ServiceAllocation{
			Priority:          int32(sa.Priority),
			Namespaces:        slices.Clone(sa.Namespaces),
			NamespaceSelector: c.oneSelector(obj, path+".namespaceSelectors", sa.NamespaceSelectors, "the pool serves only namespaces matching the first selector"),
			ServiceSelector:   c.oneSelector(obj, path+".serviceSelectors", sa.ServiceSelectors, "the pool serves only Services matching the first selector"),
		}
	}
	return out
}

// normalizeAddresses checks one MetalLB address entry (a CIDR or an inclusive range) and
// writes it as Portico's schema accepts it.
func normalizeAddresses(entry string) (string, error) {
	entry = strings.TrimSpace(entry)
	if from, to, isRange := strings.Cut(entry, "-"); isRange {
		a, err := netip.ParseAddr(strings.TrimSpace(from))
		if err != nil {
			return "", err
		}
		b, err := netip.ParseAddr(strings.TrimSpace(to))
		if err != nil {
			return "", err
		}
		if a.Is4() != b.Is4() || b.Less(a) {
			return "", errors.New("a range goes from a lower to a higher address of one family")
		}
		return a.String() + "-" + b.String(), nil
	}
	p, err := netip.ParsePrefix(entry)
	if err != nil {
		return "", err
	}
	return p.Masked().String(), nil
}

// buggyIPs reports where MetalLB's avoidBuggyIPs (no address ending in .0 or .255) and
// Portico's rule (no first and last address of an IPv4 CIDR of /30 or larger) differ.
func (c *converter) buggyIPs(obj string, entries []string) {
	for _, e := range entries {
		first, last, cidrBits := bounds(e)
		if !first.Is4() {
			continue
		}
		metallb := countDotZero255(first, last)
		var portico uint64
		if cidrBits >= 0 && cidrBits <= 30 {
			portico = 2
		}
		same := metallb == portico && (portico == 0 || (first.As4()[3] == 0 && last.As4()[3] == 255 && metallb == 2))
		if !same {
			c.lossy(obj, "spec.avoidBuggyIPs", "%s: MetalLB skips its %d address(es) ending in .0 or .255; Portico (allowNetworkAndBroadcast false) skips %d (the first and last of a CIDR of /30 or larger, none of a range), so new allocations may differ", e, metallb, portico)
		}
	}
}

// bounds returns the first and last address of an entry and its prefix length (-1 for a range).
func bounds(entry string) (netip.Addr, netip.Addr, int) {
	if from, to, ok := strings.Cut(entry, "-"); ok {
		return netip.MustParseAddr(from), netip.MustParseAddr(to), -1
	}
	p := netip.MustParsePrefix(entry)
	first := p.Addr()
	last := first
	if first.Is4() {
		v := uint32(first.As4()[0])<<24 | uint32(first.As4()[1])<<16 | uint32(first.As4()[2])<<8 | uint32(first.As4()[3])
		v |= uint32(1)<<(32-p.Bits()) - 1
		last = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return first, last, p.Bits()
}

// countDotZero255 counts IPv4 addresses ending in .0 or .255 in [first, last].
func countDotZero255(first, last netip.Addr) uint64 {
	u := func(a netip.Addr) uint64 {
		b := a.As4()
		return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	}
	// Addresses ending in .0 in [0, n]: n/256 + 1; ending in .255: (n+1)/256.
	upTo := func(n int64) uint64 {
		if n < 0 {
			return 0
		}
		return uint64(n/256+1) + uint64((n+1)/256)
	}
	return upTo(int64(u(last))) - upTo(int64(u(first))-1)
}

// oneSelector converts MetalLB's list of selectors (any may match) to Portico's single one.
func (c *converter) oneSelector(obj, field string, sels []metav1.LabelSelector, lossyMsg string) *metav1.LabelSelector {
	for i := range sels {
		if _, err := metav1.LabelSelectorAsSelector(&sels[i]); err != nil {
			c.bad(obj, fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
	}
	switch len(sels) {
	case 0:
		return nil
	case 1:
		return sels[0].DeepCopy()
	default:
		c.lossy(obj, field, "%d selectors (any may match) have no equivalent: Portico takes one; %s", len(sels), lossyMsg)
		return sels[0].DeepCopy()
	}
}

// selectedPools returns the indexes of the pools an advertisement selects.
func (c *converter) selectedPools(obj string, sel poolSelection) []int {
	if len(sel.IPAddressPools) == 0 && len(sel.IPAddressPoolSelectors) == 0 {
		out := make([]int, len(c.in.Pools))
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for _, name := range sel.IPAddressPools {
		if !slices.ContainsFunc(c.in.Pools, func(p IPAddressPool) bool { return p.Name == name }) {
			c.note(obj, "spec.ipAddressPools", "names pool %q, which does not exist; nothing to convert for it", name)
		}
	}
	var selectors []labels.Selector
	for i := range sel.IPAddressPoolSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel.IPAddressPoolSelectors[i])
		if err != nil {
			c.bad(obj, fmt.Sprintf("spec.ipAddressPoolSelectors[%d]", i), "%v", err)
			continue
		}
		selectors = append(selectors, s)
	}
	for i, p := range c.in.Pools {
		if slices.Contains(sel.IPAddressPools, p.Name) || slices.ContainsFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(p.Labels)) }) {
			out = append(out, i)
		}
	}
	return out
}

// l2 sets each pool's announce.l2 from the L2Advertisements that select it.
func (c *converter) l2(pools []v1alpha1.AddressPool) {
	byPool := make([][]*L2Advertisement, len(pools))
	for i := range c.in.L2 {
		ad := &c.in.L2[i]
		obj := ad.ref(KindL2Advertisement)
		for _, pi := range c.selectedPools(obj, ad.Spec.poolSelection) {
			byPool[pi] = append(byPool[pi], ad)
		}
		c.oneSelector(obj, "spec.nodeSelectors", ad.Spec.NodeSelectors, "")
		if len(ad.Spec.ServiceSelectors) > 0 {
			c.lossy(obj, "spec.serviceSelectors", "no equivalent: Portico announces every Service of the pool over L2, not only those the selectors match")
		}
		if len(ad.Spec.Interfaces) == 0 {
			c.note(obj, "spec.interfaces", "empty: MetalLB answers on every interface it does not exclude, Portico on the interfaces that hold an address in the announced address's subnet")
		}
	}
	for pi, ads := range byPool {
		if len(ads) == 0 {
			continue
		}
		l2 := &v1alpha1.L2Announce{}
		allNodes, allIfaces := false, false
		var nodeSels []metav1.LabelSelector
		for _, ad := range ads {
			if len(ad.Spec.NodeSelectors) == 0 {
				allNodes = true
			}
			nodeSels = append(nodeSels, ad.Spec.NodeSelectors...)
			if len(ad.Spec.Interfaces) == 0 {
				allIfaces = true
			}
			l2.Interfaces = append(l2.Interfaces, ad.Spec.Interfaces...)
		}
		if allIfaces {
			l2.Interfaces = nil
		}
		slices.Sort(l2.Interfaces)
		l2.Interfaces = slices.Compact(l2.Interfaces)
		if !allNodes {
			nodeSels = uniqueSelectors(nodeSels)
			if len(nodeSels) > 1 {
				c.lossy(c.in.Pools[pi].ref(KindIPAddressPool), "L2Advertisement nodeSelectors", "the L2Advertisements selecting it name %d different node selectors; Portico takes one: only nodes matching the first announce", len(nodeSels))
			}
			l2.NodeSelector = nodeSels[0].DeepCopy()
		}
		pools[pi].Spec.Announce.L2 = l2
	}
}

// bgp sets each pool's announce.bgp from the BGPAdvertisements that select it.
func (c *converter) bgp(pools []v1alpha1.AddressPool) {
	byPool := make([][]*v1alpha1.BGPAnnounce, len(pools))
	adNames := make([][]string, len(pools))
	for i := range c.in.BGP {
		ad := &c.in.BGP[i]
		obj := ad.ref(KindBGPAdvertisement)
		b := c.bgpAnnounce(obj, ad)
		for _, pi := range c.selectedPools(obj, ad.Spec.poolSelection) {
			byPool[pi] = append(byPool[pi], b)
			adNames[pi] = append(adNames[pi], ad.Name)
		}
	}
	for pi, bs := range byPool {
		if len(bs) == 0 {
			continue
		}
		for _, b := range bs[1:] {
			if !reflect.DeepEqual(b, bs[0]) {
				c.lossy(c.in.Pools[pi].ref(KindIPAddressPool), "BGPAdvertisements", "selected by BGPAdvertisements %s with different settings; MetalLB advertises each, Portico one: the pool gets %s's", strings.Join(adNames[pi], ", "), adNames[pi][0])
				break
			}
		}
		pools[pi].Spec.Announce.BGP = bs[0]
	}
	for pi := range pools {
		if pools[pi].Spec.Announce.L2 == nil && pools[pi].Spec.Announce.BGP == nil {
			c.note(c.in.Pools[pi].ref(KindIPAddressPool), "advertisements", "no L2Advertisement or BGPAdvertisement selects it: MetalLB allocates from it but announces nothing, and so does Portico")
		}
	}
}

func (c *converter) bgpAnnounce(obj string, ad *BGPAdvertisement) *v1alpha1.BGPAnnounce {
	s := ad.Spec
	b := &v1alpha1.BGPAnnounce{
		Peers:               slices.Clone(s.Peers),
		NodeSelector:        c.oneSelector(obj, "spec.nodeSelectors", s.NodeSelectors, "only nodes matching the first advertise"),
		AggregationLength:   s.AggregationLength,
		AggregationLengthV6: s.AggregationLengthV6,
	}
	if s.LocalPref != 0 {
		lp := int64(s.LocalPref)
		b.LocalPreference = &lp
	}
	if s.AggregationLength != nil && (*s.AggregationLength < 0 || *s.AggregationLength > 32) {
		c.bad(obj, "spec.aggregationLength", "must be 0-32, is %d", *s.AggregationLength)
	}
	if s.AggregationLengthV6 != nil && (*s.AggregationLengthV6 < 0 || *s.AggregationLengthV6 > 128) {
		c.bad(obj, "spec.aggregationLengthV6", "must be 0-128, is %d", *s.AggregationLengthV6)
	}
	for i, v := range s.Communities {
		field := fmt.Sprintf("spec.communities[%d]", i)
		value := v
		if !strings.Contains(v, ":") {
			var ok bool
			if value, ok = c.communityAlias(v); !ok {
				c.bad(obj, field, "%q is neither a community value nor an alias a Community declares", v)
				continue
			}
		}
		if large, ok := strings.CutPrefix(value, "large:"); ok {
			if !validCommunity(large, 3, 32) {
				c.bad(obj, field, "%q is not a large community (large:ASN:DATA1:DATA2, each 32 bits)", value)
				continue
			}
			b.LargeCommunities = append(b.LargeCommunities, large)
			continue
		}
		if !validCommunity(value, 2, 16) {
			c.bad(obj, field, "%q is not a community (ASN:VALUE, each 16 bits)", value)
			continue
		}
		b.Communities = append(b.Communities, value)
	}
	slices.Sort(b.Communities)
	b.Communities = slices.Compact(b.Communities)
	slices.Sort(b.LargeCommunities)
	b.LargeCommunities = slices.Compact(b.LargeCommunities)
	for _, peer := range s.Peers {
		if !slices.ContainsFunc(c.in.Peers, func(p BGPPeer) bool { return p.Name == peer }) {
			c.lossy(obj, "spec.peers", "names BGPPeer %q, which does not exist: Portico reports the pool's BGP settings invalid until it does", peer)
		}
	}
	if len(s.ServiceSelectors) > 0 {
		c.lossy(obj, "spec.serviceSelectors", "no equivalent: Portico advertises every Service of the pool, not only those the selectors match")
	}
	return b
}

func (c *converter) communityAlias(name string) (string, bool) {
	for _, cm := range c.in.Communities {
		for _, a := range cm.Spec.Communities {
			if a.Name == name {
				return a.Value, true
			}
		}
	}
	return "", false
}

func validCommunity(v string, parts, bits int) bool {
	fields := strings.Split(v, ":")
	if len(fields) != parts {
		return false
	}
	for _, f := range fields {
		if _, err := strconv.ParseUint(f, 10, bits); err != nil {
			return false
		}
	}
	return true
}

func uniqueSelectors(sels []metav1.LabelSelector) []metav1.LabelSelector {
	var out []metav1.LabelSelector
	for _, s := range sels {
		if !slices.ContainsFunc(out, func(o metav1.LabelSelector) bool { return reflect.DeepEqual(o, s) }) {
			out = append(out, s)
		}
	}
	return out
}

// peer converts one BGPPeer; ok is false for a peer Portico cannot express at all (it is then
// a lossy finding, not an object).
func (c *converter) peer(mp *BGPPeer, pools []v1alpha1.AddressPool) (v1alpha1.BGPPeer, bool) {
	obj := mp.ref(KindBGPPeer)
	s := mp.Spec
	out := v1alpha1.BGPPeer{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BGPPeer"},
		ObjectMeta: objectMeta(mp.meta, KindBGPPeer),
	}
	if msgs := validation.IsDNS1123Subdomain(mp.Name); len(msgs) > 0 {
		c.bad(obj, "metadata.name", "not a valid BGPPeer name: %s", strings.Join(msgs, "; "))
	}
	if s.PeerAddress == "" {
		c.lossy(obj, "spec.interface", "unnumbered peering (interface %q) has no equivalent: Portico needs a peer address; the peer is not converted", s.Interface)
		return out, false
	}
	addr, err := netip.ParseAddr(s.PeerAddress)
	if err != nil {
		c.bad(obj, "spec.peerAddress", "%q: %v", s.PeerAddress, err)
		return out, false
	}
	if s.PeerASN == 0 {
		c.lossy(obj, "spec.dynamicASN", "a dynamic peer ASN (%q) has no equivalent: Portico needs peerASN; the peer is not converted", s.DynamicASN)
		return out, false
	}
	if s.MyASN == 0 {
		c.bad(obj, "spec.myASN", "required")
	}
	out.Spec.PeerAddress = addr.String()
	out.Spec.PeerASN = int64(s.PeerASN)
	out.Spec.MyASN = int64(s.MyASN)
	out.Spec.Port = int32(s.PeerPort)
	out.Spec.HoldTime = c.wholeSeconds(obj, "spec.holdTime", s.HoldTime, true)
	out.Spec.KeepaliveTime = c.wholeSeconds(obj, "spec.keepaliveTime", s.KeepaliveTime, false)
	out.Spec.NodeSelector = c.oneSelector(obj, "spec.nodeSelectors", s.NodeSelectors, "only nodes matching the first peer")
	if s.Password != "" {
		c.lossy(obj, "spec.password", "a password in the resource has no equivalent: put it in a Secret and set spec.passwordSecretRef on the BGPPeer; the converted peer runs without TCP MD5 until then")
	}
	if ref := s.PasswordSecret; ref != nil && ref.Name != "" {
		ns := ref.Namespace
		if ns == "" {
			ns = mp.Namespace
		}
		out.Spec.PasswordSecretRef = &v1alpha1.SecretKeyRef{Namespace: ns, Name: ref.Name, Key: "password"}
		c.note(obj, "spec.passwordSecret", "kept as passwordSecretRef %s/%s key password: portico-agent needs get, list and watch on that Secret", ns, ref.Name)
	}
	if s.EBGPMultiHop {
		out.Spec.EBGPMultihopTTL = multihopTTL
		c.note(obj, "spec.ebgpMultiHop", "converted to ebgpMultihopTTL %d", multihopTTL)
	}
	if s.BFDProfile != "" {
		out.Spec.BFD = c.bfd(obj, s.BFDProfile)
		if out.Spec.BFD != nil && s.EBGPMultiHop {
			c.lossy(obj, "spec.bfdProfile", "Portico runs single-hop BFD only, not with ebgpMultihopTTL: BFD is left off")
			out.Spec.BFD = nil
		}
	}
	unsupported := []struct {
		field string
		set   bool
	}{
		{"spec.localASN", s.LocalASN != 0},
		{"spec.dynamicASN", s.DynamicASN != ""},
		{"spec.sourceAddress", s.SourceAddress != ""},
		{"spec.connectTime", s.ConnectTime != nil},
		{"spec.routerID", s.RouterID != ""},
		{"spec.enableGracefulRestart", s.EnableGracefulRestart},
		{"spec.vrf", s.VRF != ""},
		{"spec.disableMP", s.DisableMP},
		{"spec.dualStackAddressFamily", s.DualStackAddressFamily},
	}
	for _, u := range unsupported {
		if u.set {
			c.lossy(obj, u.field, "no equivalent in Portico's BGPPeer: left out")
		}
	}
	if mixed := c.otherFamilyPools(addr, pools); len(mixed) > 0 {
		c.lossy(obj, "spec.peerAddress", "an %s peer carries only %s routes in Portico; pool(s) %s have addresses of the other family it would advertise: add a BGPPeer for the router's other address", family(addr), family(addr), strings.Join(mixed, ", "))
	}
	return out, true
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// otherFamilyPools lists the BGP-announced pools with addresses of the family peer does not carry.
func (c *converter) otherFamilyPools(peer netip.Addr, pools []v1alpha1.AddressPool) []string {
	var out []string
	for _, p := range pools {
		if p.Spec.Announce.BGP == nil {
			continue
		}
		for _, e := range p.Spec.Addresses {
			first, _, _ := bounds(e)
			if first.Is4() != peer.Is4() {
				out = append(out, p.Name)
				break
			}
		}
	}
	return out
}

// wholeSeconds checks a MetalLB timer against Portico's rule (whole seconds; a hold time of 0
// or at least 3 s).
func (c *converter) wholeSeconds(obj, field string, d *metav1.Duration, hold bool) *metav1.Duration {
	if d == nil {
		return nil
	}
	if d.Duration < 0 || d.Duration%time.Second != 0 {
		c.bad(obj, field, "%s: Portico takes whole seconds", d.Duration)
	}
	if hold && d.Duration > 0 && d.Duration < 3*time.Second {
		c.bad(obj, field, "%s: a hold time is 0 or at least 3s", d.Duration)
	}
	return d.DeepCopy()
}

func (c *converter) bfd(obj, name string) *v1alpha1.BFDSettings {
	var prof *BFDProfile
	for i := range c.in.BFDProfiles {
		if c.in.BFDProfiles[i].Name == name {
			prof = &c.in.BFDProfiles[i]
		}
	}
	if prof == nil {
		c.bad(obj, "spec.bfdProfile", "BFDProfile %q does not exist", name)
		return nil
	}
	pobj := prof.ref(KindBFDProfile)
	on := true
	out := &v1alpha1.BFDSettings{Enabled: &on, ReceiveInterval: ms(prof.Spec.ReceiveInterval), TransmitInterval: ms(prof.Spec.TransmitInterval)}
	if m := prof.Spec.DetectMultiplier; m != nil {
		if *m < 1 || *m > 255 {
			c.bad(pobj, "spec.detectMultiplier", "must be 1-255, is %d", *m)
		}
		out.Multiplier = int32(*m)
	}
	if prof.Spec.EchoMode != nil && *prof.Spec.EchoMode || prof.Spec.EchoInterval != nil {
		c.lossy(pobj, "spec.echoMode", "BFD echo has no equivalent (Portico's BFD sends no echo packets): left out")
	}
	if prof.Spec.PassiveMode != nil && *prof.Spec.PassiveMode {
		c.lossy(pobj, "spec.passiveMode", "passive BFD has no equivalent (Portico's BFD is active): left out")
	}
	if prof.Spec.MinimumTTL != nil {
		c.lossy(pobj, "spec.minimumTtl", "no equivalent (Portico's BFD is single-hop, TTL 255): left out")
	}
	return out
}

func ms(v *uint32) *metav1.Duration {
	if v == nil {
		return nil
	}
	return &metav1.Duration{Duration: time.Duration(*v) * time.Millisecond}
}

// checkPools runs the converted pools through Portico's own pool parser (the one the
// controller and the agents use): any problem or overlap is an input problem.
func (c *converter) checkPools(pools []v1alpha1.AddressPool) {
	if len(c.problems) > 0 {
		return // the addresses already failed; Parse would repeat it
	}
	for _, p := range addresspool.Resolve(pools) {
		obj := "AddressPool " + p.Name
		for _, e := range p.Problems {
			c.bad(obj, e.Field, "%s", e.ErrorBody())
		}
		if len(p.Conflicts) > 0 {
			c.bad(obj, "spec.addresses", "overlaps pool(s) %s", strings.Join(p.Conflicts, ", "))
		}
	}
}
