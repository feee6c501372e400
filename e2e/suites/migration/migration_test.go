package migration_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/e2e/framework/metallb"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
	metallbmigrate "github.com/portico-lb/portico/migrate/metallb"
)

const (
	metallbNS = metallbmigrate.DefaultNamespace
	appsNS    = "apps"
)

// workload is the Services MetalLB serves before the switch: auto-assigned (the first gets the
// pool's .0, which Portico hands out only with allowNetworkAndBroadcast), pinned with both of
// MetalLB's annotation spellings and with spec.loadBalancerIP, a pool named by annotation, two
// Services sharing one address, dual stack and IPv6 only.
func workload() []*corev1.Service {
	lb := func(name string, mutate ...func(*corev1.Service)) *corev1.Service {
		return services.LoadBalancer(appsNS, name, mutate...)
	}
	ann := func(kv ...string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			for i := 0; i+1 < len(kv); i += 2 {
				s.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	port := func(p int32) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Ports[0].Port = p }
	}
	families := func(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, fams }
	}
	shared := func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "shop"} }
	return []*corev1.Service{
		lb("auto-1"),
		lb("auto-2"),
		lb("pinned", ann("metallb.io/loadBalancerIPs", "198.18.40.77")),
		lb("pinned-legacy", ann("metallb.universe.tf/loadBalancerIPs", "198.18.40.78")),
		lb("pinned-spec", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.18.40.79" }),
		lb("reserved", ann("metallb.io/address-pool", "reserved")),
		lb("reserved-legacy", ann("metallb.universe.tf/address-pool", "reserved")),
		lb("shop-http", shared, ann("metallb.io/allow-shared-ip", "shop", "metallb.io/loadBalancerIPs", "198.18.40.50")),
		lb("shop-https", shared, port(443), ann("metallb.io/allow-shared-ip", "shop", "metallb.io/loadBalancerIPs", "198.18.40.50")),
		lb("routed", ann("metallb.io/address-pool", "bgp-pool")),
		lb("dual", families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)),
		lb("v6", families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol)),
		lb("v6-pinned", families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol), ann("metallb.io/loadBalancerIPs", "fd00:c613:40::99")),
	}
}

// TestMigrateFromMetalLBKeepsEveryAddress: the real MetalLB controller allocates for the
// workload; it stops; `portico-controller migrate metallb` converts its configuration;
// portico-controller (baremetal, class-less Services) takes the Services over. A watch on the
// Services, open across the whole switch, sees no change of any status.loadBalancer, every
// Service carries Portico's Ready condition, the AddressPools count the addresses, and a new
// Service gets an address no one holds.
func TestMigrateFromMetalLBKeepsEveryAddress(t *testing.T) {
	ctx := context.Background()
	cs := testCluster.Client()
	cl := newClient(t)
	for _, ns := range []string{metallbNS, appsNS} {
		if err := testCluster.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := testCluster.InstallCRDs(ctx, built.CRDDir); err != nil {
		t.Fatalf("installing MetalLB's CRDs: %v", err)
	}
	if err := testCluster.Apply(ctx, filepath.Join("testdata", "metallb.yaml")); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last (after the processes stopped): the suite's control
	// plane is shared, and a second run (-count=2) must start from the same state.
	t.Cleanup(func() { cleanUp(t, cs, cl) })

	// MetalLB allocates. Its controller reads its own Pod at start; the namespace's default
	// ServiceAccount, which a Pod needs, comes from kube-controller-manager a moment after the
	// namespace.
	pod := metallb.OwnPod(metallbNS, "metallb-controller")
	wait.For(t, 30*time.Second, "MetalLB's Pod object", func() error {
		_, err := cs.CoreV1().Pods(metallbNS).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	ml := process.StartForTest(t, built.Controller, process.Options{
		Name: "metallb-controller",
		Args: metallb.ControllerArgs(metallbNS, pod.Name, ports.ForTest(t), ports.ForTest(t)),
		Env:  append(os.Environ(), "KUBECONFIG="+testCluster.KubeconfigPath()),
	})
	h := services.Helper{TB: t, CS: cs, Namespace: appsNS, Timeout: 90 * time.Second, Dumps: []func() string{ml.LogTail}}
	svcs := workload()
	for _, s := range svcs {
		h.Create(s)
	}
	before := map[string]corev1.LoadBalancerStatus{}
	for _, s := range svcs {
		got := h.Wait(s.Name, "MetalLB's addresses", func(svc *corev1.Service) string {
			if len(svc.Status.LoadBalancer.Ingress) != len(svc.Spec.IPFamilies) {
				return fmt.Sprintf("%d ingress for families %v", len(svc.Status.LoadBalancer.Ingress), svc.Spec.IPFamilies)
			}
			return ""
		})
		before[s.Name] = got.Status.LoadBalancer
	}
	checkWorkload(t, before)
	t.Logf("MetalLB %s allocated %d Services: %s", metallb.Version, len(before), describe(before))

	// From here on, every change of any Service's status.loadBalancer is recorded.
	rec := watchStatus(t, cs, appsNS, before)

	if err := ml.Stop(process.DefaultGrace); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Logf("stopping MetalLB: %v", err)
	}

	// Nothing is half-written: an input with one bad entry writes no pool.
	out, err := migrate("-f", writeFile(t, badInput), "--kubeconfig="+testCluster.KubeconfigPath())
	if err == nil || !strings.Contains(out, "spec.addresses[0]") {
		t.Fatalf("migrate with a bad address: err %v, output:\n%s", err, out)
	}
	assertPools(t, cl, 0)

	// The dry run prints the objects and writes nothing.
	out, err = migrate("--dry-run", "--kubeconfig="+testCluster.KubeconfigPath())
	if err != nil {
		t.Fatalf("migrate --dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: AddressPool", "name: l2-pool", "kind: BGPPeer", "services: 13 LoadBalancer Service(s) MetalLB serves, 13 keep their addresses"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	assertPools(t, cl, 0)

	out, err = migrate("--kubeconfig=" + testCluster.KubeconfigPath())
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	t.Logf("migrate metallb:\n%s", out)
	assertPools(t, cl, 3)

	// Portico takes over.
	pc := process.StartForTest(t, controllerBin, process.Options{Name: "portico-controller", Args: []string{
		"--kubeconfig=" + testCluster.KubeconfigPath(), "--classless-provider=baremetal", "--leader-elect=false",
		"--metrics-bind-address=" + ports.AddrForTest(t), "--health-probe-bind-address=" + ports.AddrForTest(t)}})
	h.Dumps, h.Alive = []func() string{pc.LogTail}, func() error {
		if pc.Exited() {
			return fmt.Errorf("portico-controller exited: %v", pc.Err())
		}
		return nil
	}
	for _, s := range svcs {
		h.Wait(s.Name, "Portico's Ready condition", porticoReady)
	}
	// The pools account for every address: l2-pool holds auto-1, auto-2, three pinned, the
	// shared address once, dual's IPv4 (7 IPv4) and dual's, v6's and v6-pinned's IPv6 (3).
	wantUsage := map[string][2]int64{"l2-pool": {7, 3}, "reserved": {2, 0}, "bgp-pool": {1, 0}}
	h.Eventually("AddressPool usage", func() error {
		var list v1alpha1.AddressPoolList
		if err := cl.List(ctx, &list); err != nil {
			return err
		}
		for _, p := range list.Items {
			var got [2]int64
			if p.Status.IPv4 != nil {
				got[0] = p.Status.IPv4.Assigned
			}
			if p.Status.IPv6 != nil {
				got[1] = p.Status.IPv6.Assigned
			}
			if got != wantUsage[p.Name] {
				return fmt.Errorf("pool %s assigned (v4, v6) = %v, want %v", p.Name, got, wantUsage[p.Name])
			}
		}
		return nil
	})

	// A new Service gets an address no Service holds.
	fresh := h.Create(services.LoadBalancer(appsNS, "after"))
	got := h.Wait(fresh.Name, "an address from Portico", func(svc *corev1.Service) string {
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return "no ingress"
		}
		return ""
	})
	ip := got.Status.LoadBalancer.Ingress[0].IP
	for name, st := range before {
		for _, in := range st.Ingress {
			if in.IP == ip {
				t.Errorf("new Service got %s, which %s holds", ip, name)
			}
		}
	}

	changes, events := rec.stop()
	for _, c := range changes {
		t.Errorf("status changed across the switch: %s", c)
	}
	t.Logf("across the switch: %d watch events on %d Services, %d status.loadBalancer changes; new Service got %s",
		events, len(before), len(changes), ip)
}

// checkWorkload checks that MetalLB did what the workload asks, so that the test starts from
// the state it means to migrate.
func checkWorkload(t *testing.T, st map[string]corev1.LoadBalancerStatus) {
	t.Helper()
	ips := func(name string) []string {
		var out []string
		for _, in := range st[name].Ingress {
			out = append(out, in.IP)
		}
		return out
	}
	in := func(name, prefix string) {
		for _, ip := range ips(name) {
			if !netip.MustParsePrefix(prefix).Contains(netip.MustParseAddr(ip)) {
				t.Fatalf("MetalLB gave %s %s, outside %s", name, ip, prefix)
			}
		}
	}
	want := map[string]string{"pinned": "198.18.40.77", "pinned-legacy": "198.18.40.78", "pinned-spec": "198.18.40.79",
		"shop-http": "198.18.40.50", "shop-https": "198.18.40.50", "v6-pinned": "fd00:c613:40::99"}
	for name, ip := range want {
		if got := ips(name); !slices.Equal(got, []string{ip}) {
			t.Fatalf("MetalLB gave %s %v, want %s", name, got, ip)
		}
	}
	in("reserved", "198.18.41.0/24")
	in("reserved-legacy", "198.18.41.0/24")
	in("routed", "198.18.42.0/28")
	in("v6", "fd00:c613:40::/120")
	if len(ips("dual")) != 2 {
		t.Fatalf("dual got %v", ips("dual"))
	}
	// MetalLB takes the pool's first address for whichever auto-assigned Service (auto-1,
	// auto-2, or dual's IPv4 half) its queue reaches first.
	var all []string
	for name := range st {
		all = append(all, ips(name)...)
	}
	if !slices.Contains(all, "198.18.40.0") {
		t.Fatalf("MetalLB handed out no .0 address (auto-1 %v, auto-2 %v, dual %v): the test means to migrate one", ips("auto-1"), ips("auto-2"), ips("dual"))
	}
}

func describe(st map[string]corev1.LoadBalancerStatus) string {
	var parts []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range st {
			if !yield(k) {
				return
			}
		}
	}) {
		var ips []string
		for _, in := range st[name].Ingress {
			ips = append(ips, in.IP)
		}
		parts = append(parts, name+"="+strings.Join(ips, ","))
	}
	return strings.Join(parts, " ")
}

// recorder watches the Services of a namespace and records every status.loadBalancer that differs
// from the one the Service had when the recording began.
type recorder struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	changes []string
	events  int
}

func watchStatus(t *testing.T, cs kubernetes.Interface, ns string, before map[string]corev1.LoadBalancerStatus) *recorder {
	t.Helper()
	list, err := cs.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if !equality.Semantic.DeepEqual(s.Status.LoadBalancer, before[s.Name]) {
			t.Fatalf("%s changed before the recording began: %+v", s.Name, s.Status.LoadBalancer)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Services(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &recorder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				r.observe(ev, before)
			}
		}
	}()
	t.Cleanup(r.cancelAndWait)
	return r
}

func (r *recorder) observe(ev watch.Event, before map[string]corev1.LoadBalancerStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	svc, ok := ev.Object.(*corev1.Service)
	if !ok {
		r.changes = append(r.changes, fmt.Sprintf("watch event %s with %T", ev.Type, ev.Object))
		return
	}
	old, known := before[svc.Name]
	if !known {
		return // a Service created after the switch
	}
	if ev.Type == watch.Deleted || !equality.Semantic.DeepEqual(svc.Status.LoadBalancer, old) {
		r.changes = append(r.changes, fmt.Sprintf("%s %s: %s -> %s", ev.Type, svc.Name, ingressString(old), ingressString(svc.Status.LoadBalancer)))
	}
}

// ingressString renders a status.loadBalancer for messages: "ip/ipMode,...".
func ingressString(st corev1.LoadBalancerStatus) string {
	var parts []string
	for _, in := range st.Ingress {
		mode := "-"
		if in.IPMode != nil {
			mode = string(*in.IPMode)
		}
		parts = append(parts, fmt.Sprintf("%s/%s%v", in.IP+in.Hostname, mode, in.Ports))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (r *recorder) cancelAndWait() { r.cancel(); <-r.done }

// stop ends the recording and returns the changes and the number of events seen.
func (r *recorder) stop() ([]string, int) {
	r.cancelAndWait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes, r.events
}

// migrate runs `portico-controller migrate metallb ARGS...` and returns its combined output.
func migrate(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, controllerBin, append([]string{"migrate", "metallb"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const badInput = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: good, namespace: metallb-system}
spec: {addresses: [198.18.43.0/24]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: bad, namespace: metallb-system}
spec: {addresses: [198.18.44.0/33]}
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "input.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func assertPools(t *testing.T, cl client.Client, want int) {
	t.Helper()
	var list v1alpha1.AddressPoolList
	if err := cl.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != want {
		t.Fatalf("%d AddressPools exist, want %d", len(list.Items), want)
	}
}

func newClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(testCluster.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// cleanUp removes what the test made on the suite's shared control plane: the Services of
// appsNS (their finalizers first: portico-controller may be gone), the AddressPools and
// BGPPeers the command wrote, MetalLB's configuration and its controller's Pod object.
func cleanUp(t *testing.T, cs kubernetes.Interface, cl client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cs.CoreV1().Services(appsNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("cleaning up: %v", err)
		return
	}
	for _, s := range list.Items {
		if _, err := services.Update(ctx, cs, appsNS, s.Name, func(s *corev1.Service) { s.Finalizers = nil }); err != nil {
			t.Errorf("cleaning up %s: %v", s.Name, err)
		}
		if err := cs.CoreV1().Services(appsNS).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up %s: %v", s.Name, err)
		}
	}
	for _, obj := range []client.Object{&v1alpha1.AddressPool{}, &v1alpha1.BGPPeer{}} {
		if err := cl.DeleteAllOf(ctx, obj); err != nil {
			t.Errorf("cleaning up %T: %v", obj, err)
		}
	}
	for _, o := range metallbObjects {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "metallb.io", Version: o[0], Kind: o[1]})
		if err := cl.DeleteAllOf(ctx, u, client.InNamespace(metallbNS)); err != nil && !meta.IsNoMatchError(err) {
			t.Errorf("cleaning up MetalLB's %s: %v", o[1], err)
		}
	}
	// At once: no kubelet runs the Pod to confirm a graceful deletion.
	if err := cs.CoreV1().Pods(metallbNS).Delete(ctx, "metallb-controller", *metav1.NewDeleteOptions(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleaning up MetalLB's Pod: %v", err)
	}
	wait.For(t, time.Minute, "the test's objects gone", func() error {
		var left []string
		l, err := cs.CoreV1().Services(appsNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, s := range l.Items {
			left = append(left, "Service/"+s.Name)
		}
		if _, err := cs.CoreV1().Pods(metallbNS).Get(ctx, "metallb-controller", metav1.GetOptions{}); err == nil {
			left = append(left, "Pod/metallb-controller")
		}
		var pools v1alpha1.AddressPoolList
		if err := cl.List(ctx, &pools); err != nil {
			return err
		}
		for _, p := range pools.Items {
			left = append(left, "AddressPool/"+p.Name)
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// metallbObjects are the kinds testdata/metallb.yaml creates (version, kind).
var metallbObjects = [][2]string{
	{"v1beta1", "IPAddressPool"}, {"v1beta1", "L2Advertisement"}, {"v1beta1", "BGPAdvertisement"},
	{"v1beta1", "Community"}, {"v1beta2", "BGPPeer"},
}

// porticoReady is a Wait condition: the Service carries Portico's Ready condition, true.
func porticoReady(svc *corev1.Service) string {
	if meta.IsStatusConditionTrue(svc.Status.Conditions, service.ConditionReady) {
		return ""
	}
	return "not Ready under portico-controller"
}
