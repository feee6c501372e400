package aws_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// finalizer is portico-controller's; stockFinalizer is the stock service controller's
// (portico-ccm).
const (
	finalizer      = "portico-lb.io/load-balancer-cleanup"
	stockFinalizer = "service.kubernetes.io/load-balancer-cleanup"
	waitTimeout    = 90 * time.Second
)

// env is one test's world: moto reset and seeded for its own cluster name, the Nodes of that
// seed in the API server (every other Node deleted), a namespace and a class.
type env struct {
	t       testing.TB
	srv     *moto.Server
	f       *moto.Fixture
	cluster string
	ns      string
	class   string
	cs      kubernetes.Interface
	svcs    services.Helper // Services of the env's namespace
	aws     *awsView
}

type envOptions struct {
	Nodes int // default 3
	AZs   int // default 2
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.AZs == 0 {
		o.AZs = 2
	}
	name := strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-"))
	h := sha256.Sum256([]byte(t.Name()))
	short := name
	if len(short) > 40 {
		short = short[:40]
	}
	short = strings.Trim(short, "-") + "-" + hex.EncodeToString(h[:3])
	srv := moto.Shared(t)
	e := &env{
		t:       t,
		srv:     srv,
		cluster: "e2e-" + hex.EncodeToString(h[:4]),
		ns:      short,
		class:   "portico-lb.io/" + short,
		cs:      testCluster.Client(),
	}
	e.svcs = services.Helper{TB: t, CS: e.cs, Namespace: e.ns, Timeout: waitTimeout}
	e.f = srv.Seed(t, moto.SeedOptions{Cluster: e.cluster, AZs: o.AZs, Nodes: o.Nodes})
	e.aws = newAWSView(srv, e.f)
	ctx := context.Background()
	if err := e.cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("deleting old Nodes: %v", err)
	}
	for _, n := range e.f.Nodes {
		e.addNode(n, nil)
	}
	if err := testCluster.EnsureNamespace(ctx, e.ns); err != nil {
		t.Fatal(err)
	}
	// Runs after the controller's cleanup (registered later): whatever a failed test left is
	// released so that the next test's controllers do not see it.
	t.Cleanup(e.releaseServices)
	return e
}

// releaseServices strips the finalizers of the namespace's Services and deletes them.
func (e *env) releaseServices() {
	ctx := context.Background()
	list, err := e.cs.CoreV1().Services(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("listing services: %v", err)
		return
	}
	for _, s := range list.Items {
		if len(s.Finalizers) > 0 {
			s.Finalizers = nil
			_, _ = e.cs.CoreV1().Services(e.ns).Update(ctx, &s, metav1.UpdateOptions{})
		}
		_ = e.cs.CoreV1().Services(e.ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
	}
}

// addNode writes the Node of a seeded instance, as a kubelet would, Ready.
func (e *env) addNode(n moto.Node, labels map[string]string) {
	e.t.Helper()
	ctx := context.Background()
	node := e.f.KubeNode(n, labels)
	status := node.Status
	created, err := e.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating Node %s: %v", n.Name, err)
	}
	created.Status = status
	if _, err := e.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("writing status of Node %s: %v", n.Name, err)
	}
}

// labelNode sets (value non-nil) or removes (nil) labels of a Node.
func (e *env) labelNode(name string, labels map[string]*string) {
	e.t.Helper()
	ctx := context.Background()
	// Another writer (the controller) may update it between the Get and the Update.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range labels {
			if v == nil {
				delete(n.Labels, k)
			} else {
				n.Labels[k] = *v
			}
		}
		_, err = e.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("labelling Node %s: %v", name, err)
	}
}

func (e *env) deleteNode(name string) {
	e.t.Helper()
	if err := e.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting Node %s: %v", name, err)
	}
}

// instanceIDs returns the instance IDs of the seeded nodes at the given indexes.
func (e *env) instanceIDs(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, e.f.Nodes[i].InstanceID)
	}
	return slices.Sorted(slices.Values(out))
}

// Kinds of load balancer, as the type annotation names them.
const (
	kindNLB     = "nlb"
	kindClassic = "classic"
)

// lbService is a LoadBalancer Service of the env's class (classless when class is ""), port
// 80/TCP, of the given kind.
func (e *env) lbService(name, kind string, mutate ...func(*corev1.Service)) *corev1.Service {
	if kind == kindNLB {
		mutate = append([]func(*corev1.Service){func(s *corev1.Service) { s.Annotations[annotations.AWSLoadBalancerType] = "nlb" }}, mutate...)
	}
	return e.svcs.LoadBalancer(name, append([]func(*corev1.Service){services.WithClass(e.class)}, mutate...)...)
}

func (e *env) create(svc *corev1.Service) *corev1.Service { e.t.Helper(); return e.svcs.Create(svc) }

// update applies mutate with conflict retries and returns the updated Service.
func (e *env) update(name string, mutate func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	return e.svcs.Update(name, mutate)
}

func (e *env) delete(name string) { e.t.Helper(); e.svcs.Delete(name) }

// eventually waits up to waitTimeout for cond, which says why it does not hold yet; on timeout
// it fails the test with that reason and the process's log.
func (e *env) eventually(p *proc, what string, cond func() (bool, string)) {
	e.t.Helper()
	var dumps []func() string
	if p != nil {
		dumps = append(dumps, p.LogTail)
	}
	wait.For(e.t, waitTimeout, what, func() error {
		if ok, why := cond(); !ok {
			return errors.New(why)
		}
		return nil
	}, dumps...)
}

// waitLB waits until Service name's status names a load balancer that moto holds and check
// accepts it, and returns it.
func (e *env) waitLB(p *proc, name, what string, check func(*corev1.Service, *lbView) string) (*corev1.Service, *lbView) {
	e.t.Helper()
	var svc *corev1.Service
	var lb *lbView
	e.eventually(p, name+": "+what, func() (bool, string) {
		var err error
		svc, err = e.cs.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ing := svc.Status.LoadBalancer.Ingress
		if len(ing) != 1 || ing[0].Hostname == "" {
			return false, fmt.Sprintf("ingress %+v, conditions %+v", ing, svc.Status.Conditions)
		}
		lb, err = e.aws.byDNS(ing[0].Hostname)
		if err != nil {
			return false, err.Error()
		}
		if lb == nil {
			return false, "status names " + ing[0].Hostname + ", which moto does not hold"
		}
		if check != nil {
			if why := check(svc, lb); why != "" {
				return false, why + "\n" + lb.String()
			}
		}
		return true, ""
	})
	return svc, lb
}

// waitGone waits until Service name is gone (its finalizer released).
func (e *env) waitGone(p *proc, name string) {
	e.t.Helper()
	h := e.svcs
	if p != nil {
		h.Dumps = []func() string{p.LogTail}
	}
	h.WaitGone(name)
}

// owned lists what moto holds tagged for the env's cluster, failing on duplicates.
func (e *env) owned() moto.Inventory {
	e.t.Helper()
	inv := e.srv.Owned(e.t, e.cluster)
	if d := inv.Duplicates(); len(d) > 0 {
		e.t.Errorf("duplicate resources in moto: %v\n%s", d, inv)
	}
	return inv
}

// lbsOf returns the load balancers (both kinds) tagged for the Service uid.
func lbsOf(inv moto.Inventory, uid string) moto.Inventory {
	var out moto.Inventory
	for _, r := range inv {
		if (r.Kind == moto.KindLoadBalancer || r.Kind == moto.KindClassicLB) && r.Tags["portico-lb.io/service-uid"] == uid {
			out = append(out, r)
		}
	}
	return out
}

// expectNothingOwned fails the test if moto holds anything tagged for the env's cluster.
func (e *env) expectNothingOwned() {
	e.t.Helper()
	if inv := e.srv.Owned(e.t, e.cluster); len(inv) > 0 {
		e.t.Errorf("left in moto after deletion:\n%s", inv)
	}
	if rules := e.aws.ownedNodeRules(); len(rules) > 0 {
		e.t.Errorf("node security group keeps rules of deleted load balancers: %v", rules)
	}
}

// proc is a running portico-controller or portico-ccm.
type proc struct {
	*process.Process
	metrics string // http://127.0.0.1:PORT/metrics (controller only)
}

// ctlOptions shape a portico-controller run.
type ctlOptions struct {
	// Endpoint is the AWS endpoint (moto's URL or a proxy's); default moto's.
	Endpoint string
	// Classless serves Services without a class (--classless-provider=aws) instead of the
	// env's class.
	Classless bool
	Args      []string
}

// startController runs portico-controller with the AWS provider; it stops when the test ends.
func (e *env) startController(o ctlOptions) *proc {
	e.t.Helper()
	if o.Endpoint == "" {
		o.Endpoint = e.srv.URL
	}
	metricsAddr := ports.AddrForTest(e.t)
	args := []string{
		"--kubeconfig=" + testCluster.KubeconfigPath(),
		"--aws-endpoint=" + o.Endpoint,
		"--aws-region=" + e.srv.Region,
		"--cluster-name=" + e.cluster,
		"--leader-elect=false",
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=0",
	}
	if o.Classless {
		args = append(args, "--classless-provider=aws")
	} else {
		args = append(args, "--class="+e.class+"=aws")
	}
	args = append(args, o.Args...)
	p := startProc(e.t, "portico-controller", args, e.awsEnv(o.Endpoint))
	p.metrics = "http://" + metricsAddr + "/metrics"
	return p
}

// startCCM runs portico-ccm with the AWS provider serving class-less Services.
func (e *env) startCCM(endpoint string) *proc {
	e.t.Helper()
	if endpoint == "" {
		endpoint = e.srv.URL
	}
	cfg := filepath.Join(e.t.TempDir(), "cloud.yaml")
	content := fmt.Sprintf("provider: aws\naws:\n  region: %s\n  endpoint: %s\n", e.srv.Region, endpoint)
	if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	port := ports.ForTest(e.t)
	args := []string{
		"--kubeconfig=" + testCluster.KubeconfigPath(),
		"--cloud-provider=portico",
		"--cloud-config=" + cfg,
		"--cluster-name=" + e.cluster,
		"--controllers=service",
		"--leader-elect=false",
		"--configure-cloud-routes=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=2",
	}
	return startProc(e.t, "portico-ccm", args, e.awsEnv(endpoint))
}

// awsEnv is the process environment: the SDK's default chain pointed at moto (or the proxy).
func (e *env) awsEnv(endpoint string) []string {
	env := append(os.Environ(), e.srv.Env()...)
	return append(env, "AWS_ENDPOINT_URL="+endpoint)
}

// startProc runs cmd/<name> until the test ends.
func startProc(t testing.TB, name string, args, env []string) *proc {
	t.Helper()
	bin := gobuild.BinaryForTest(t, "cmd/"+name)
	return &proc{Process: process.StartForTest(t, bin, process.Options{Name: name, Args: args, Env: env})}
}

// scrape returns the process's /metrics text.
func (p *proc) scrape() (string, error) {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", p.metrics, resp.Status)
	}
	return string(b), nil
}

var getOpts = metav1.GetOptions{}

func t0() context.Context { return context.Background() }
