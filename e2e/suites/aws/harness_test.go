package aws_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/moto"
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
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	if e.class != "" {
		class := e.class
		svc.Spec.LoadBalancerClass = &class
	}
	if kind == kindNLB {
		svc.Annotations[annotations.AWSLoadBalancerType] = "nlb"
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func (e *env) create(svc *corev1.Service) *corev1.Service {
	e.t.Helper()
	out, err := e.cs.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating Service %s: %v", svc.Name, err)
	}
	return out
}

// update applies mutate with conflict retries and returns the updated Service.
func (e *env) update(name string, mutate func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	var out *corev1.Service
	ctx := context.Background()
	// Another writer (the controller) may update it between the Get and the Update.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		svc, err := e.cs.CoreV1().Services(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		mutate(svc)
		out, err = e.cs.CoreV1().Services(e.ns).Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("updating Service %s: %v", name, err)
	}
	return out
}

func (e *env) delete(name string) {
	e.t.Helper()
	if err := e.cs.CoreV1().Services(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting Service %s: %v", name, err)
	}
}

// eventually polls cond every 200 ms until it holds or waitTimeout passes; on timeout it fails
// the test with the last reason cond gave and the process log.
func (e *env) eventually(p *proc, what string, cond func() (bool, string)) {
	e.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil {
		logs := ""
		if p != nil {
			logs = p.logTail()
		}
		e.t.Fatalf("timed out after %s waiting for %s; last: %s\n%s", waitTimeout, what, last, logs)
	}
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
	e.eventually(p, name+" to be deleted", func() (bool, string) {
		s, err := e.cs.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("finalizers %v", s.Finalizers)
	})
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
	name    string
	cmd     *exec.Cmd
	logPath string
	metrics string // http://127.0.0.1:PORT/metrics (controller only)
	done    chan struct{}
	exitErr error
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
	metricsAddr := freeAddr(e.t)
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
	p := startProc(e.t, "portico-controller", bins["portico-controller"], args, e.awsEnv(o.Endpoint))
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
	port := freePort(e.t)
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
	return startProc(e.t, "portico-ccm", bins["portico-ccm"], args, e.awsEnv(endpoint))
}

// awsEnv is the process environment: the SDK's default chain pointed at moto (or the proxy).
func (e *env) awsEnv(endpoint string) []string {
	env := append(os.Environ(), e.srv.Env()...)
	return append(env, "AWS_ENDPOINT_URL="+endpoint)
}

func startProc(t testing.TB, name, bin string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: name, logPath: filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", name, p.logPath, p.logTail())
		}
	})
	return p
}

// kill SIGKILLs the process and waits for it to exit.
func (p *proc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, then SIGKILL after 20 s, and waits.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill()
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	state := "running"
	if p.exited() {
		state = fmt.Sprintf("exited: %v", p.exitErr)
	}
	return fmt.Sprintf("--- %s (%s) log tail ---\n%s", p.name, state, b)
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

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func freePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(port)
	return n
}

var getOpts = metav1.GetOptions{}

func t0() context.Context { return context.Background() }
