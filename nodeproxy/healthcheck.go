package nodeproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// healthCheck is what one healthCheckNodePort reports.
type healthCheck struct {
	Service        types.NamespacedName
	LocalEndpoints int
}

// serviceHealthServers runs one HTTP server per healthCheckNodePort of the
// externalTrafficPolicy: Local Services: 200 when the Service has a ready endpoint on this node
// and the agent is healthy, else 503, for any path.
type serviceHealthServers struct {
	log     logr.Logger
	healthy func() bool

	mu      sync.Mutex
	servers map[uint16]*serviceHealthServer
}

type serviceHealthServer struct {
	state atomic.Pointer[healthCheck]
	srv   *http.Server
}

func newServiceHealthServers(log logr.Logger, healthy func() bool) *serviceHealthServers {
	return &serviceHealthServers{log: log, healthy: healthy, servers: map[uint16]*serviceHealthServer{}}
}

// Sync makes the running servers match want (port -> state): it starts missing ones, updates
// counts and stops the ones no longer wanted. A port that cannot be bound is retried on the next
// sync.
func (s *serviceHealthServers) Sync(want map[uint16]healthCheck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for port, srv := range s.servers {
		if _, ok := want[port]; !ok {
			_ = srv.srv.Close()
			delete(s.servers, port)
		}
	}
	for port, hc := range want {
		if srv, ok := s.servers[port]; ok {
			srv.state.Store(&hc)
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(int(port)))
		if err != nil {
			s.log.Error(err, "Cannot open health check node port; retrying on the next sync", "service", hc.Service, "port", port)
			continue
		}
		srv := &serviceHealthServer{}
		srv.state.Store(&hc)
		srv.srv = &http.Server{Handler: s.handler(srv), ReadHeaderTimeout: 5 * time.Second}
		s.servers[port] = srv
		go func() { _ = srv.srv.Serve(l) }()
	}
}

// Close stops every server.
func (s *serviceHealthServers) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for port, srv := range s.servers {
		_ = srv.srv.Close()
		delete(s.servers, port)
	}
}

func (s *serviceHealthServers) handler(srv *serviceHealthServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hc := srv.state.Load()
		healthy := s.healthy()
		body := struct {
			Service struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"service"`
			LocalEndpoints      int  `json:"localEndpoints"`
			ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
		}{LocalEndpoints: hc.LocalEndpoints, ServiceProxyHealthy: healthy}
		body.Service.Namespace, body.Service.Name = hc.Service.Namespace, hc.Service.Name
		code := http.StatusServiceUnavailable
		if hc.LocalEndpoints > 0 && healthy {
			code = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(hc.LocalEndpoints))
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// proxyHealth answers /healthz and /livez for the agent itself.
type proxyHealth struct {
	timeout  time.Duration
	pending  func() time.Time // oldest unsynced change, zero when none
	eligible func() bool      // the node is not being deleted
	metrics  *metrics

	lastUpdated atomic.Int64 // unix nanoseconds of the last successful sync
}

// healthy is false when a change has waited longer than the timeout for a successful sync.
func (h *proxyHealth) healthy() bool {
	since := h.pending()
	return since.IsZero() || time.Since(since) < h.timeout
}

func (h *proxyHealth) handler(withNode bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		healthy := h.healthy()
		now := time.Now()
		last := time.Unix(0, h.lastUpdated.Load())
		if healthy {
			last = now // as kube-proxy: healthy answers report "now"
		}
		body := map[string]any{"lastUpdated": last, "currentTime": now, "healthy": healthy}
		ok := healthy
		counter := h.metrics.livez
		if withNode {
			eligible := h.eligible()
			body["nodeEligible"] = eligible
			ok = ok && eligible
			counter = h.metrics.healthz
		}
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		counter.WithLabelValues(strconv.Itoa(code)).Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// serveHTTP runs handler on addr until ctx ends.
func serveHTTP(ctx context.Context, addr string, handler http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", addr, err)
	}
	return nil
}
