package addresspool

import (
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// Range is one entry of a pool's addresses: an inclusive span of one family.
type Range struct {
	// Entry is the text as written in the pool.
	Entry string
	// First and Last bound the entry.
	First, Last netip.Addr
	// UsableFirst and UsableLast bound the addresses that may be handed out: First and Last
	// unless the entry is an IPv4 CIDR of /30 or larger whose network and broadcast addresses
	// are avoided.
	UsableFirst, UsableLast netip.Addr
}

// Contains reports whether a lies within the entry.
func (r Range) Contains(a netip.Addr) bool { return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 }

// Usable reports whether a may be handed out.
func (r Range) Usable(a netip.Addr) bool {
	return r.UsableFirst.Compare(a) <= 0 && a.Compare(r.UsableLast) <= 0
}

// Family returns the entry's IP family.
func (r Range) Family() corev1.IPFamily { return familyOf(r.First) }

// Pool is an AddressPool parsed for allocation.
type Pool struct {
	Name       string
	Created    time.Time
	Generation int64
	Internal   bool
	AutoAssign bool
	Priority   int32
	Ranges     []Range
	// Namespaces, NamespaceSelector and ServiceSelector restrict the Services served; nil
	// selectors select everything.
	Namespaces        []string
	NamespaceSelector labels.Selector
	ServiceSelector   labels.Selector
	// Problems make the pool invalid; Conflicts name older pools it overlaps. Either excludes
	// the pool from new allocations; Services keep addresses they hold from it.
	Problems  field.ErrorList
	Conflicts []string
}

// Usable reports whether the pool may serve new allocations.
func (p *Pool) Usable() bool { return len(p.Problems) == 0 && len(p.Conflicts) == 0 }

// Contains reports whether a is one of the pool's addresses (usable or not).
func (p *Pool) Contains(a netip.Addr) bool {
	return slices.ContainsFunc(p.Ranges, func(r Range) bool { return r.Contains(a) })
}

// UsableAddr reports whether a may be handed out from the pool; reserved is true when a is in
// the pool but is an avoided network or broadcast address.
func (p *Pool) UsableAddr(a netip.Addr) (ok, reserved bool) {
	for _, r := range p.Ranges {
		if r.Contains(a) {
			return r.Usable(a), !r.Usable(a)
		}
	}
	return false, false
}

// Families returns the families the pool has addresses of, IPv4 first.
func (p *Pool) Families() []corev1.IPFamily {
	var out []corev1.IPFamily
	for _, f := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		if slices.ContainsFunc(p.Ranges, func(r Range) bool { return r.Family() == f }) {
			out = append(out, f)
		}
	}
	return out
}

// Size returns how many addresses of family f the pool can hand out, saturated at MaxInt64.
func (p *Pool) Size(f corev1.IPFamily) int64 {
	total := new(big.Int)
	for _, r := range p.Ranges {
		if r.Family() == f {
			total.Add(total, span(r.UsableFirst, r.UsableLast))
		}
	}
	if !total.IsInt64() {
		return math.MaxInt64
	}
	return total.Int64()
}

// span is the number of addresses in [a, b], zero when b < a.
func span(a, b netip.Addr) *big.Int {
	if b.Compare(a) < 0 {
		return new(big.Int)
	}
	n := new(big.Int).Sub(new(big.Int).SetBytes(b.AsSlice()), new(big.Int).SetBytes(a.AsSlice()))
	return n.Add(n, big.NewInt(1))
}

// Parse parses one AddressPool. Problems are recorded in the result's Problems with paths
// under spec; the result is never nil.
func Parse(ap *v1alpha1.AddressPool) *Pool {
	spec := field.NewPath("spec")
	p := &Pool{
		Name:       ap.Name,
		Created:    ap.CreationTimestamp.Time,
		Generation: ap.Generation,
		Internal:   ap.Spec.Internal,
		AutoAssign: ap.Spec.AutoAssign == nil || *ap.Spec.AutoAssign,
	}
	if len(ap.Spec.Addresses) == 0 {
		p.Problems = append(p.Problems, field.Required(spec.Child("addresses"), "a pool needs at least one CIDR or range"))
	}
	for i, entry := range ap.Spec.Addresses {
		r, err := parseRange(entry, ap.Spec.AllowNetworkAndBroadcast)
		if err != nil {
			p.Problems = append(p.Problems, field.Invalid(spec.Child("addresses").Index(i), entry, err.Error()))
			continue
		}
		for _, prev := range p.Ranges {
			if overlaps(prev, r) {
				p.Problems = append(p.Problems, field.Invalid(spec.Child("addresses").Index(i), entry, "overlaps "+prev.Entry+" of the same pool"))
			}
		}
		p.Ranges = append(p.Ranges, r)
	}
	if sa := ap.Spec.ServiceAllocation; sa != nil {
		path := spec.Child("serviceAllocation")
		p.Priority = sa.Priority
		if sa.Priority < 0 {
			p.Problems = append(p.Problems, field.Invalid(path.Child("priority"), sa.Priority, "must not be negative"))
		}
		p.Namespaces = slices.Clone(sa.Namespaces)
		p.NamespaceSelector = selector(sa.NamespaceSelector, path.Child("namespaceSelector"), &p.Problems)
		p.ServiceSelector = selector(sa.ServiceSelector, path.Child("serviceSelector"), &p.Problems)
	}
	if l2 := ap.Spec.Announce.L2; l2 != nil {
		selector(l2.NodeSelector, spec.Child("announce", "l2", "nodeSelector"), &p.Problems)
	}
	return p
}

func selector(ls *metav1.LabelSelector, path *field.Path, problems *field.ErrorList) labels.Selector {
	if ls == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		*problems = append(*problems, field.Invalid(path, ls.String(), err.Error()))
		return nil
	}
	return s
}

// parseRange parses "CIDR" or "first-last".
func parseRange(entry string, allowNetBcast bool) (Range, error) {
	s := strings.TrimSpace(entry)
	if first, last, ok := strings.Cut(s, "-"); ok {
		a, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return Range{}, fmt.Errorf("range start: %w", err)
		}
		b, err := netip.ParseAddr(strings.TrimSpace(last))
		if err != nil {
			return Range{}, fmt.Errorf("range end: %w", err)
		}
		switch {
		case a.Zone() != "" || b.Zone() != "":
			return Range{}, fmt.Errorf("addresses must not have a zone")
		case a.Is4In6() || b.Is4In6():
			return Range{}, fmt.Errorf("write IPv4 addresses in dotted form, not IPv4-mapped IPv6")
		case a.Is4() != b.Is4():
			return Range{}, fmt.Errorf("range mixes IPv4 and IPv6")
		case b.Less(a):
			return Range{}, fmt.Errorf("range end is before its start")
		}
		return Range{Entry: entry, First: a, Last: b, UsableFirst: a, UsableLast: b}, nil
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return Range{}, fmt.Errorf("must be a CIDR (198.18.10.0/24) or a range (198.18.10.10-198.18.10.20)")
	}
	if pfx.Addr().Is4In6() {
		return Range{}, fmt.Errorf("write IPv4 prefixes in dotted form, not IPv4-mapped IPv6")
	}
	if pfx.Masked() != pfx {
		return Range{}, fmt.Errorf("has host bits set; did you mean %s?", pfx.Masked())
	}
	r := Range{Entry: entry, First: pfx.Addr(), Last: lastAddr(pfx)}
	r.UsableFirst, r.UsableLast = r.First, r.Last
	if pfx.Addr().Is4() && pfx.Bits() <= 30 && !allowNetBcast {
		r.UsableFirst, r.UsableLast = r.First.Next(), r.Last.Prev()
	}
	return r, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func overlaps(a, b Range) bool {
	return a.Family() == b.Family() && a.First.Compare(b.Last) <= 0 && b.First.Compare(a.Last) <= 0
}

// Resolve parses every AddressPool and marks overlaps between pools: of two overlapping
// pools the older one (creation time, then name) keeps serving and the younger one gets a
// Conflict naming it, so adding a bad pool never disturbs one that works. Invalid pools take
// part in neither side of a conflict. The result is sorted by name.
func Resolve(items []v1alpha1.AddressPool) []*Pool {
	pools := make([]*Pool, len(items))
	for i := range items {
		pools[i] = Parse(&items[i])
	}
	byAge := slices.Clone(pools)
	sort.SliceStable(byAge, func(i, j int) bool {
		if !byAge[i].Created.Equal(byAge[j].Created) {
			return byAge[i].Created.Before(byAge[j].Created)
		}
		return byAge[i].Name < byAge[j].Name
	})
	for i, p := range byAge {
		if len(p.Problems) > 0 {
			continue
		}
		for _, older := range byAge[:i] {
			if len(older.Problems) > 0 || len(older.Conflicts) > 0 {
				continue
			}
			if poolsOverlap(older, p) {
				p.Conflicts = append(p.Conflicts, older.Name)
			}
		}
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	return pools
}

func poolsOverlap(a, b *Pool) bool {
	for _, ra := range a.Ranges {
		for _, rb := range b.Ranges {
			if overlaps(ra, rb) {
				return true
			}
		}
	}
	return false
}

// Containing returns the pool that contains a, preferring a usable one, or nil.
func Containing(pools []*Pool, a netip.Addr) *Pool {
	var found *Pool
	for _, p := range pools {
		if p.Contains(a) {
			if p.Usable() {
				return p
			}
			if found == nil {
				found = p
			}
		}
	}
	return found
}

// Usage counts the addresses of pool p that held (the addresses Services hold) covers, per
// family, and how many more p can hand out. A pool that is not usable has nothing available.
func Usage(p *Pool, held []netip.Addr) map[corev1.IPFamily]v1alpha1.FamilyUsage {
	out := map[corev1.IPFamily]v1alpha1.FamilyUsage{}
	seen := map[netip.Addr]bool{}
	assigned := map[corev1.IPFamily]int64{}
	usableAssigned := map[corev1.IPFamily]int64{}
	for _, a := range held {
		if seen[a] || !p.Contains(a) {
			continue
		}
		seen[a] = true
		assigned[familyOf(a)]++
		if ok, _ := p.UsableAddr(a); ok {
			usableAssigned[familyOf(a)]++
		}
	}
	for _, f := range p.Families() {
		u := v1alpha1.FamilyUsage{Assigned: assigned[f]}
		if p.Usable() {
			if size := p.Size(f); size == math.MaxInt64 {
				u.Available = size
			} else {
				u.Available = size - usableAssigned[f]
			}
		}
		out[f] = u
	}
	return out
}

// familyOf returns the IP family of a (IPv4-mapped IPv6 addresses count as IPv4).
func familyOf(a netip.Addr) corev1.IPFamily {
	if a.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}
