package operations

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/providers/baremetal"
	"github.com/portico-lb/portico/providers/registry"
)

// TestControllerNotReadyWithoutAPIServer: portico-controller's /readyz follows the API server.
// The controller reaches a real kube-apiserver through a TCP relay the test can cut: ready
// once its caches are synced, not ready (naming the API server it cannot reach) while the
// relay refuses connections, ready again once it is back. Before the fix /readyz checked only
// that the caches had synced once, and stayed ready with the API server out of reach.
func TestControllerNotReadyWithoutAPIServer(t *testing.T) {
	e := poolsStart(t)
	relay := readyRelayStart(t, strings.TrimPrefix(e.c.Host(), "https://"))
	restCfg := rest.CopyConfig(e.c.Config())
	restCfg.Host = "https://" + relay.addr

	probe := readyFreeAddr(t)
	cfg := config.DefaultController(registry.NewConfigs())
	cfg.Classes = map[string]string{"portico-lb.io/ready": baremetal.Name}
	cfg.LeaderElect = false
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", probe
	cfg.Providers[baremetal.Name].(*baremetal.Config).DisableMetrics = true
	mgr, err := controllers.NewManager(context.Background(), cfg, restCfg, ctrl.Log.WithName("ready"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cluster.StartManager(t, mgr)

	readyz := func() (int, string, error) {
		resp, err := http.Get("http://" + probe + "/readyz?verbose")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	isReady := func() error {
		code, body, err := readyz()
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d:\n%s", code, body)
		}
		return nil
	}
	wait.For(t, time.Minute, "the controller ready through the relay", isReady)
	// The reconciler's own watches start after the first caches: a Service it handles (it gets
	// the finalizer) shows they are running before the relay is cut.
	svcs := e.svcs()
	svcs.Create(svcs.LoadBalancer("ready", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("portico-lb.io/ready") }))
	svcs.Wait("ready", "handled by the controller", func(s *corev1.Service) string {
		if len(s.Finalizers) == 0 {
			return "no finalizer yet"
		}
		return ""
	})

	relay.cut()
	wait.For(t, time.Minute, "the controller not ready with the API server out of reach", func() error {
		code, body, err := readyz()
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			return fmt.Errorf("/readyz still 200:\n%s", body)
		}
		if !strings.Contains(body, "[-]apiserver") {
			return fmt.Errorf("/readyz %d does not name the apiserver check:\n%s", code, body)
		}
		return nil
	})

	relay.restore()
	wait.For(t, time.Minute, "the controller ready again once the API server is back", isReady)
}

// readyRelay forwards TCP connections from a loopback port to the API server until cut: then
// it closes every connection and refuses new ones, as an unreachable API server would.
type readyRelay struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]struct{}
}

func readyRelayStart(t *testing.T, target string) *readyRelay {
	t.Helper()
	r := &readyRelay{t: t, target: target, conns: map[net.Conn]struct{}{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	r.serve(l)
	t.Cleanup(r.cut)
	return r
}

func (r *readyRelay) serve(l net.Listener) {
	r.mu.Lock()
	r.l = l
	r.mu.Unlock()
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", r.target)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns[in], r.conns[out] = struct{}{}, struct{}{}
			r.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

func (r *readyRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.l != nil {
		r.l.Close()
		r.l = nil
	}
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}

func (r *readyRelay) restore() {
	r.t.Helper()
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(l)
}

// readyFreeAddr is a loopback address with a port free at the time of the call.
func readyFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
