package ccm_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/e2e/framework/cluster"
)

// stockFinalizer is the finalizer the stock service controller puts on every Service it owns.
const stockFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// pool is the reference provider's pool in the cloud config; it lies inside cluster.LBPoolCIDR.
var pool = netip.MustParsePrefix("198.18.128.0/24")

// TestCCM runs portico-ccm (the stock cloud-controller-manager with the Portico adapter and the
// reference provider) against a real control plane and checks what users see through the API.
func TestCCM(t *testing.T) {
	// Building the binary (the first time, k8s.io/cloud-provider/app) and starting the control
	// plane both take a while: overlap them.
	binDir := t.TempDir()
	built := make(chan error, 1)
	go func() { built <- buildCCM(binDir) }()
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "portico-ccm")

	ctx := context.Background()
	for i, ip := range []string{"198.19.0.11", "198.19.0.12"} {
		spec := cluster.NodeSpec{Name: fmt.Sprintf("node-%d", i+1), InternalIPs: []netip.Addr{netip.MustParseAddr(ip)}}
		if _, err := c.RegisterNode(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("BadCloudConfigIsStartupError", func(t *testing.T) {
		cfg := writeCloudConfig(t, "provider: gce\nreference: {pool: 198.18.128.0}\n")
		// No API server is reachable through this kubeconfig: the file is checked before the
		// stock command connects to anything.
		out, err := runToExit(t, bin, ccmArgs(filepath.Join(t.TempDir(), "none"), cfg, 0)...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != config.ExitStartup {
			t.Fatalf("portico-ccm with a bad cloud config: err = %v, want exit code %d\n%s", err, config.ExitStartup, out)
		}
		for _, want := range []string{`cloudConfig.provider: Unsupported value: "gce"`, `cloudConfig.reference.pool: Invalid value: "198.18.128.0"`} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not report %s:\n%s", want, tail(out))
			}
		}
	})

	ccm := startCCM(t, bin, c.KubeconfigPath(), writeCloudConfig(t, "provider: reference\nreference: {pool: "+pool.String()+"}\n"))
	cs := c.Client()

	t.Run("LoadBalancerLifecycle", func(t *testing.T) {
		ns := namespace(t, c, "lifecycle")
		svc := createService(t, cs, lbService(ns, "web"))
		got := waitService(t, ccm, cs, ns, "web", "ingress and finalizer", func(s *corev1.Service) bool {
			return len(s.Status.LoadBalancer.Ingress) > 0 && hasFinalizer(s)
		})
		ing := got.Status.LoadBalancer.Ingress
		if len(ing) != 1 {
			t.Fatalf("ingress = %+v, want one entry", ing)
		}
		if ip, err := netip.ParseAddr(ing[0].IP); err != nil || !pool.Contains(ip) {
			t.Errorf("ingress IP %q is not from the reference pool %s", ing[0].IP, pool)
		}
		if ing[0].IPMode == nil || *ing[0].IPMode != corev1.LoadBalancerIPModeVIP {
			t.Errorf("ingress ipMode = %v, want VIP", ing[0].IPMode)
		}
		waitEvent(t, ccm, cs, svc, "EnsuredLoadBalancer", "")

		// A third node changes the backend set: the stock node sync calls UpdateLoadBalancer.
		if _, err := c.RegisterNode(ctx, cluster.NodeSpec{Name: "node-3", InternalIPs: []netip.Addr{netip.MustParseAddr("198.19.0.13")}}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ccm, cs, svc, "UpdatedLoadBalancer", "")

		if err := cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ccm, cs, ns, "web")
		waitEvent(t, ccm, cs, svc, "DeletedLoadBalancer", "")
	})

	t.Run("ClassedServiceUntouched", func(t *testing.T) {
		ns := namespace(t, c, "classed")
		classed := lbService(ns, "other", func(s *corev1.Service) {
			class := "example.com/other-lb"
			s.Spec.LoadBalancerClass = &class
		})
		createService(t, cs, classed)
		// A class-less Service created after it is served; by then the classed one would have
		// been handled too, had the stock controller wanted it.
		createService(t, cs, lbService(ns, "mine"))
		waitService(t, ccm, cs, ns, "mine", "ingress", func(s *corev1.Service) bool { return len(s.Status.LoadBalancer.Ingress) > 0 })

		got, err := cs.CoreV1().Services(ns).Get(ctx, "other", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Finalizers) > 0 || len(got.Status.LoadBalancer.Ingress) > 0 {
			t.Errorf("classed Service was touched: finalizers %v, ingress %+v", got.Finalizers, got.Status.LoadBalancer.Ingress)
		}
		if evs := events(t, cs, got); len(evs) > 0 {
			t.Errorf("classed Service has Events: %v", evs)
		}
	})

	t.Run("InvalidAnnotationReported", func(t *testing.T) {
		ns := namespace(t, c, "invalid")
		svc := createService(t, cs, lbService(ns, "bad", func(s *corev1.Service) {
			s.Annotations = map[string]string{"portico-lb.io/internal": "yes"}
		}))
		ev := waitEvent(t, ccm, cs, svc, "SyncLoadBalancerFailed", "metadata.annotations[portico-lb.io/internal]")
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, `"yes"`) {
			t.Errorf("event = %s %q, want a Warning quoting the bad value", ev.Type, ev.Message)
		}
		got, err := cs.CoreV1().Services(ns).Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.LoadBalancer.Ingress) > 0 {
			t.Errorf("invalid Service got ingress %+v", got.Status.LoadBalancer.Ingress)
		}
		if evs := eventsWithReason(t, cs, got, "EnsuredLoadBalancer"); len(evs) > 0 {
			t.Errorf("invalid Service has EnsuredLoadBalancer Events: %v", evs)
		}

		// The stock controller put its finalizer on before calling us; deleting the Service
		// still works because GetLoadBalancer reports "does not exist".
		if err := cs.CoreV1().Services(ns).Delete(ctx, "bad", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ccm, cs, ns, "bad")
	})

	ccm.checkAlive(t)
}

// ccmProcess is a running portico-ccm.
type ccmProcess struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	exitErr error
}

// ccmArgs are the flags portico-ccm needs in a test: the stock cloud-controller-manager's, with
// only the service controller, no leader election and serving on a loopback port (0: none).
func ccmArgs(kubeconfig, cloudConfig string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--cloud-provider=portico",
		"--cloud-config=" + cloudConfig,
		"--controllers=service",
		"--leader-elect=false",
		"--configure-cloud-routes=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=2",
	}
}

// startCCM runs portico-ccm until t ends and waits for its /healthz. The process dies with the
// test process (Pdeathsig); cleanup stops it with SIGTERM, then SIGKILL, and waits for it.
func startCCM(t *testing.T, bin, kubeconfig, cloudConfig string) *ccmProcess {
	t.Helper()
	port := freePort(t)
	return startCCMWith(t, bin, ccmArgs(kubeconfig, cloudConfig, port), nil, port)
}

// startCCMWith is startCCM with the whole command line, the environment (nil: this process's)
// and the --secure-port in args.
func startCCMWith(t *testing.T, bin string, args, env []string, port int) *ccmProcess {
	t.Helper()
	p := &ccmProcess{logPath: filepath.Join(t.TempDir(), "portico-ccm.log"), done: make(chan struct{})}
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
		t.Fatalf("starting portico-ccm: %v", err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	t.Logf("started portico-ccm (pid %d, log %s)", p.cmd.Process.Pid, p.logPath)

	// /healthz is in the stock --authorization-always-allow-paths and needs no credentials.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("portico-ccm exited: %v", p.exitErr)
		default:
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("portico-ccm /healthz: %v\n%s", err, p.logTail())
	}
	return p
}

func (p *ccmProcess) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("portico-ccm (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// checkAlive fails t if portico-ccm has exited.
func (p *ccmProcess) checkAlive(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("portico-ccm exited: %v\n%s", p.exitErr, p.logTail())
	default:
	}
}

func (p *ccmProcess) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return tail(string(b))
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// buildCCM builds cmd/portico-ccm into dir.
func buildCCM(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("finding the go command: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", filepath.Join(dir, "portico-ccm"), "github.com/portico-lb/portico/cmd/portico-ccm")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building portico-ccm: %w\n%s", err, out)
	}
	return nil
}

// runToExit runs bin to completion (at most a minute) and returns its combined output.
func runToExit(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeCloudConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func namespace(t *testing.T, c *cluster.Cluster, name string) string {
	t.Helper()
	if err := c.EnsureNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

func lbService(ns, name string, mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func createService(t *testing.T, cs kubernetes.Interface, svc *corev1.Service) *corev1.Service {
	t.Helper()
	created, err := cs.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	return created
}

func hasFinalizer(s *corev1.Service) bool {
	for _, f := range s.Finalizers {
		if f == stockFinalizer {
			return true
		}
	}
	return false
}

const waitTimeout = 60 * time.Second

func waitService(t *testing.T, p *ccmProcess, cs kubernetes.Interface, ns, name, what string, ok func(*corev1.Service) bool) *corev1.Service {
	t.Helper()
	var last *corev1.Service
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return ok(s), nil
	})
	if err != nil {
		p.checkAlive(t)
		t.Fatalf("Service %s/%s: no %s within %s; last finalizers %v, status %+v, events %v\n%s",
			ns, name, what, waitTimeout, finalizers(last), status(last), events(t, cs, last), p.logTail())
	}
	return last
}

func waitGone(t *testing.T, p *ccmProcess, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	var last *corev1.Service
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			last = s
		}
		return false, nil
	})
	if err != nil {
		p.checkAlive(t)
		t.Fatalf("Service %s/%s still exists after %s; finalizers %v, events %v\n%s", ns, name, waitTimeout, finalizers(last), events(t, cs, last), p.logTail())
	}
}

// waitEvent waits for an Event with reason on svc whose message contains substr.
func waitEvent(t *testing.T, p *ccmProcess, cs kubernetes.Interface, svc *corev1.Service, reason, substr string) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		for _, ev := range eventsWithReason(t, cs, svc, reason) {
			if strings.Contains(ev.Message, substr) {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		p.checkAlive(t)
		t.Fatalf("Service %s/%s: no %s Event mentioning %q within %s; events %v\n%s",
			svc.Namespace, svc.Name, reason, substr, waitTimeout, events(t, cs, svc), p.logTail())
	}
	return found
}

// events lists the Events of svc (by UID, so a re-created Service does not see old ones).
func events(t *testing.T, cs kubernetes.Interface, svc *corev1.Service) []string {
	t.Helper()
	var out []string
	for _, ev := range eventsWithReason(t, cs, svc, "") {
		out = append(out, fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Message))
	}
	return out
}

func eventsWithReason(t *testing.T, cs kubernetes.Interface, svc *corev1.Service, reason string) []corev1.Event {
	t.Helper()
	if svc == nil {
		return nil
	}
	sel := fields.Set{"involvedObject.kind": "Service", "involvedObject.name": svc.Name, "involvedObject.uid": string(svc.UID)}
	if reason != "" {
		sel["reason"] = reason
	}
	list, err := cs.CoreV1().Events(svc.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		t.Logf("listing events: %v", err)
		return nil
	}
	return list.Items
}

func finalizers(s *corev1.Service) []string {
	if s == nil {
		return nil
	}
	return s.Finalizers
}

func status(s *corev1.Service) any {
	if s == nil {
		return nil
	}
	return s.Status
}
