package ccm_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/services"
	"github.com/portico-lb/portico/e2e/framework/wait"
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
	var bin string
	built := make(chan error, 1)
	go func() { b, err := buildCCM(); bin = b; built <- err }()
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	if err := <-built; err != nil {
		t.Fatal(err)
	}

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
type ccmProcess struct{ *process.Process }

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
	port := ports.ForTest(t)
	return startCCMWith(t, bin, ccmArgs(kubeconfig, cloudConfig, port), nil, port)
}

// startCCMWith is startCCM with the whole command line, the environment (nil: this process's)
// and the --secure-port in args.
func startCCMWith(t *testing.T, bin string, args, env []string, port int) *ccmProcess {
	t.Helper()
	p := &ccmProcess{process.StartForTest(t, bin, process.Options{Name: "portico-ccm", Args: args, Env: env})}
	// /healthz is in the stock --authorization-always-allow-paths and needs no credentials.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	wait.For(t, 60*time.Second, "portico-ccm /healthz", func() error {
		if p.Exited() {
			return wait.Stop(fmt.Errorf("portico-ccm exited: %v", p.Err()))
		}
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	}, p.LogTail)
	return p
}

// alive is nil while portico-ccm runs.
func (p *ccmProcess) alive() error {
	if p.Exited() {
		return fmt.Errorf("portico-ccm exited: %v", p.Err())
	}
	return nil
}

// checkAlive fails t if portico-ccm has exited.
func (p *ccmProcess) checkAlive(t *testing.T) {
	t.Helper()
	if err := p.alive(); err != nil {
		t.Fatalf("%v\n%s", err, p.LogTail())
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// buildCCM builds (or finds in the cache) cmd/portico-ccm.
func buildCCM() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	return gobuild.Binary(ctx, "cmd/portico-ccm")
}

// runToExit runs bin to completion (at most a minute) and returns its combined output.
func runToExit(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return process.Run(ctx, bin, args...)
}

func writeCloudConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func namespace(t *testing.T, c *cluster.Cluster, name string) string {
	t.Helper()
	if err := c.EnsureNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

func lbService(ns, name string, mutate ...func(*corev1.Service)) *corev1.Service {
	return services.LoadBalancer(ns, name, mutate...)
}

func createService(t *testing.T, cs kubernetes.Interface, svc *corev1.Service) *corev1.Service {
	t.Helper()
	return services.Helper{TB: t, CS: cs}.Create(svc)
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

// helper binds the Service helpers to t, portico-ccm's liveness and log, and namespace ns.
func helper(t *testing.T, p *ccmProcess, cs kubernetes.Interface, ns string) services.Helper {
	return services.Helper{TB: t, CS: cs, Namespace: ns, Timeout: waitTimeout, Alive: p.alive, Dumps: []func() string{p.LogTail}}
}

func waitService(t *testing.T, p *ccmProcess, cs kubernetes.Interface, ns, name, what string, ok func(*corev1.Service) bool) *corev1.Service {
	t.Helper()
	return helper(t, p, cs, ns).Wait(name, what, func(s *corev1.Service) string {
		if ok(s) {
			return ""
		}
		return fmt.Sprintf("finalizers %v, events %v", s.Finalizers, events(t, cs, s))
	})
}

func waitGone(t *testing.T, p *ccmProcess, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	helper(t, p, cs, ns).WaitGone(name)
}

// waitEvent waits for an Event with reason on svc (by UID) whose message contains substr.
func waitEvent(t *testing.T, p *ccmProcess, cs kubernetes.Interface, svc *corev1.Service, reason, substr string) corev1.Event {
	t.Helper()
	var found corev1.Event
	helper(t, p, cs, svc.Namespace).Eventually(fmt.Sprintf("%s/%s: a %s Event mentioning %q", svc.Namespace, svc.Name, reason, substr), func() error {
		for _, ev := range eventsWithReason(t, cs, svc, reason) {
			if strings.Contains(ev.Message, substr) {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("events %v", events(t, cs, svc))
	})
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
