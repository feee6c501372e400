package reference

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/portico-lb/portico/providers"
)

func TestNewPool(t *testing.T) {
	cases := []struct {
		prefix      string
		first, last string
		size        uint64
	}{
		{"198.18.128.0/24", "198.18.128.1", "198.18.128.254", 254},
		{"198.18.128.77/24", "198.18.128.1", "198.18.128.254", 254}, // unmasked input
		{"10.0.0.0/30", "10.0.0.1", "10.0.0.2", 2},
		{"10.0.0.0/31", "10.0.0.0", "10.0.0.1", 2},
		{"10.0.0.7/32", "10.0.0.7", "10.0.0.7", 1},
		{"2001:db8::/120", "2001:db8::1", "2001:db8::ff", 255},
		{"2001:db8::/127", "2001:db8::", "2001:db8::1", 2},
		{"2001:db8::/32", "2001:db8::1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", ^uint64(0)},
	}
	for _, tc := range cases {
		pl := newPool(netip.MustParsePrefix(tc.prefix))
		if pl.first.String() != tc.first || pl.last.String() != tc.last || pl.size != tc.size {
			t.Errorf("newPool(%s) = [%s, %s] size %d, want [%s, %s] size %d",
				tc.prefix, pl.first, pl.last, pl.size, tc.first, tc.last, tc.size)
		}
	}
}

func TestPoolNextFitWraps(t *testing.T) {
	pl := newPool(netip.MustParsePrefix("10.0.0.0/30")) // .1, .2
	a, b := providers.Ref{Name: "a"}, providers.Ref{Name: "b"}
	got := func() string {
		t.Helper()
		addr, ok := pl.next()
		if !ok {
			return "exhausted"
		}
		return addr.String()
	}
	if g := got(); g != "10.0.0.1" {
		t.Fatalf("next = %s, want 10.0.0.1", g)
	}
	pl.take(netip.MustParseAddr("10.0.0.1"), a, true)
	pl.take(netip.MustParseAddr("10.0.0.2"), b, true)
	if g := got(); g != "exhausted" {
		t.Fatalf("next = %s, want exhausted", g)
	}
	pl.free(netip.MustParseAddr("10.0.0.1"), b) // not b's: no effect
	if g := got(); g != "exhausted" {
		t.Fatalf("after freeing another owner's address: next = %s, want exhausted", g)
	}
	pl.free(netip.MustParseAddr("10.0.0.1"), a)
	if g := got(); g != "10.0.0.1" {
		t.Fatalf("after wrap: next = %s, want 10.0.0.1", g)
	}
}

func TestDeepCopy(t *testing.T) {
	type inner struct {
		M map[string][]int
		P *int
	}
	type outer struct {
		S  []inner
		A  [2]*int
		I  any
		IP netip.Addr
		F  func() // copied by reference
	}
	one, two := 1, 2
	src := outer{
		S:  []inner{{M: map[string][]int{"k": {1}}, P: &one}},
		A:  [2]*int{&two, nil},
		I:  &inner{P: &one},
		IP: netip.MustParseAddr("2001:db8::1"),
	}
	var dst outer
	deepCopy(reflect.ValueOf(&dst).Elem(), reflect.ValueOf(src))
	if !reflect.DeepEqual(dst, src) {
		t.Fatalf("copy = %+v, want %+v", dst, src)
	}
	dst.S[0].M["k"][0] = 9
	*dst.S[0].P = 9
	*dst.A[0] = 9
	*dst.I.(*inner).P = 8
	if src.S[0].M["k"][0] != 1 || one != 1 || two != 2 {
		t.Errorf("editing the copy changed the source: %+v, one=%d two=%d", src, one, two)
	}
}
