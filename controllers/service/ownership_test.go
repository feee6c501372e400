package service

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/portico-lb/portico/annotations"
)

// svcWith is a LoadBalancer Service of class (nil: class-less) with finalizers and, when owner
// is set, a recorded holder.
func svcWith(name string, class *string, owner string, finalizers ...string) corev1.Service {
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Finalizers: finalizers},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class}}
	if owner != "" {
		svc.Annotations = map[string]string{annotations.Owner: owner, annotations.Provider: "ref"}
	}
	return svc
}

// TestHolder: which Services an instance counts as its own (and so updates, reports or
// deletes), another's, or nobody's it may touch.
func TestHolder(t *testing.T) {
	x, y := ptr.To("portico-lb.io/x"), ptr.To("portico-lb.io/y")
	me := Ownership{Instance: "ns/a", Classes: map[string]string{"portico-lb.io/x": "ref"}}
	meClassless := Ownership{Instance: "ns/a", Classes: map[string]string{"portico-lb.io/x": "ref"}, Classless: "ref"}
	clusterIP := func(s corev1.Service) corev1.Service {
		s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeClusterIP, nil
		return s
	}
	for _, tc := range []struct {
		name string
		o    Ownership
		svc  corev1.Service
		want holding
	}{
		{"new Service of my class", me, svcWith("s", x, ""), heldByNone},
		{"mine", me, svcWith("s", x, "ns/a", Finalizer), heldByMe},
		{"mine, class no longer served", me, svcWith("s", y, "ns/a", Finalizer), heldByMe},
		{"another instance's, class I serve too", me, svcWith("s", x, "ns/b", Finalizer), heldByOther},
		{"another instance's, other class", me, svcWith("s", y, "ns/b", Finalizer), heldByOther},
		{"from an older Portico, my class: adopted", me, svcWith("s", x, "", Finalizer), heldByMe},
		{"from an older Portico, other class: not mine to touch", me, svcWith("s", y, "", Finalizer), heldUnclaimed},
		{"from an older Portico, type changed: class unknown", me, clusterIP(svcWith("s", x, "", Finalizer)), heldByMe},
		{"mine, type changed", me, clusterIP(svcWith("s", x, "ns/a", Finalizer)), heldByMe},
		{"another's, type changed", me, clusterIP(svcWith("s", x, "ns/b", Finalizer)), heldByOther},
		{"portico-ccm's or the stock controller's class-less Service", me, svcWith("s", nil, "", StockFinalizer), heldByNone},
		{"the stock controller's, adopted when owning class-less Services", meClassless, svcWith("s", nil, "", StockFinalizer), heldByMe},
		{"mine class-less, class-less no longer served", me, svcWith("s", nil, "ns/a", StockFinalizer), heldByMe},
		{"another class-less instance's", meClassless, svcWith("s", nil, "ns/b", StockFinalizer), heldByOther},
		{"stock finalizer on a classed Service is someone else's", me, svcWith("s", x, "", StockFinalizer), heldByNone},
	} {
		if got := tc.o.holder(&tc.svc); got != tc.want {
			t.Errorf("%s: holder = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestClaimRelease: which finalizer the controller puts on a Service, which it trades away, and
// which it removes again with the holder record.
func TestClaimRelease(t *testing.T) {
	classed, classless := ptr.To("portico-lb.io/x"), (*string)(nil)
	owns := Ownership{Instance: "ns/a", Classes: map[string]string{"portico-lb.io/x": "ref"}, Classless: "ref"}
	for _, tc := range []struct {
		name   string
		class  *string
		before []string
		after  []string // after claim
	}{
		{"classed, fresh", classed, nil, []string{Finalizer}},
		{"classed keeps a stock finalizer it does not own", classed, []string{StockFinalizer}, []string{StockFinalizer, Finalizer}},
		{"class-less, fresh", classless, nil, []string{StockFinalizer}},
		{"class-less from the stock controller", classless, []string{StockFinalizer}, []string{StockFinalizer}},
		{"class-less from an older Portico", classless, []string{Finalizer}, []string{StockFinalizer}},
	} {
		svc := svcWith("s", tc.class, "", tc.before...)
		if !owns.claim(&svc, "ref") {
			t.Errorf("%s: claim changed nothing", tc.name)
		}
		if !slices.Equal(svc.Finalizers, tc.after) {
			t.Errorf("%s: finalizers %v, want %v", tc.name, svc.Finalizers, tc.after)
		}
		if owner, prov := annotations.OwnerOf(svc.Annotations); owner != "ns/a" || prov != "ref" {
			t.Errorf("%s: recorded holder %q provider %q", tc.name, owner, prov)
		}
		if owns.claim(&svc, "ref") {
			t.Errorf("%s: a second claim changed something", tc.name)
		}
		owns.release(&svc)
		want := slices.DeleteFunc(slices.Clone(tc.before), func(f string) bool { return f == Finalizer || tc.class == nil })
		if !slices.Equal(svc.Finalizers, want) || len(svc.Annotations) != 0 {
			t.Errorf("%s: after release finalizers %v annotations %v, want %v and none", tc.name, svc.Finalizers, svc.Annotations, want)
		}
	}
	// An instance not owning class-less Services releases the stock finalizer of a class-less
	// Service it provisioned (recorded), and no other.
	classedOnly := Ownership{Instance: "ns/a", Classes: map[string]string{"portico-lb.io/x": "ref"}}
	mine, stock := svcWith("s", nil, "ns/a", StockFinalizer), svcWith("s", nil, "", StockFinalizer)
	classedOnly.release(&mine)
	classedOnly.release(&stock)
	if len(mine.Finalizers) != 0 || !slices.Equal(stock.Finalizers, []string{StockFinalizer}) {
		t.Errorf("release: provisioned %v (want none), stock controller's %v (want kept)", mine.Finalizers, stock.Finalizers)
	}
}

func TestOrphansAndMessage(t *testing.T) {
	o := Ownership{Instance: "ns/a", Classes: map[string]string{"portico-lb.io/x": "ref", "portico-lb.io/z": "ref"}}
	svcs := []corev1.Service{
		svcWith("served", ptr.To("portico-lb.io/x"), "ns/a", Finalizer),
		svcWith("orphan-b", ptr.To("portico-lb.io/y"), "ns/a", Finalizer),
		svcWith("orphan-a", nil, "ns/a", StockFinalizer),
		svcWith("others", ptr.To("portico-lb.io/y"), "ns/b", Finalizer),
		svcWith("legacy", ptr.To("portico-lb.io/y"), "", Finalizer),
		svcWith("foreign", ptr.To("example.com/lb"), ""),
	}
	var got []string
	for _, or := range o.Orphans(svcs) {
		got = append(got, or.Service.Name+map[bool]string{true: "(unclaimed)"}[or.Unclaimed])
	}
	if want := []string{"orphan-a", "orphan-b", "legacy(unclaimed)"}; !slices.Equal(got, want) {
		t.Errorf("orphans %v, want %v", got, want)
	}
	msg := o.notServedMessage(&svcs[1])
	for _, want := range []string{`loadBalancerClass "portico-lb.io/y"`, "instance ns/a", `serves "portico-lb.io/x" and "portico-lb.io/z"`, "kept"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if msg := o.notServedMessage(&svcs[2]); !strings.Contains(msg, "Services without a loadBalancerClass") {
		t.Errorf("class-less message %q", msg)
	}
}

// TestHolderRecordIsOurOwnWrite: recording the holder does not re-run a reconcile (it would cut
// a provider's retry delay short); a user's annotation change does.
func TestHolderRecordIsOurOwnWrite(t *testing.T) {
	before := svcWith("s", ptr.To("portico-lb.io/x"), "")
	claimed := before
	claimed.Annotations = map[string]string{annotations.Owner: "ns/a", annotations.Provider: "ref"}
	edited := claimed
	edited.Annotations = map[string]string{annotations.Owner: "ns/a", annotations.Provider: "ref", annotations.Internal: "true"}
	p := ignoreStatusOnly{}
	if p.Update(event.UpdateEvent{ObjectOld: &before, ObjectNew: &claimed}) {
		t.Error("the holder record triggers a reconcile")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: &claimed, ObjectNew: &edited}) {
		t.Error("a user's annotation does not trigger a reconcile")
	}
}
