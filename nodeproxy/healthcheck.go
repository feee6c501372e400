package nodeproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/nodeproxy/rules"
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
	// bindFailed reports a port that cannot be opened, once until it opens (nil: log only).
	bindFailed func(svc types.NamespacedName, port uint16, err error)

	mu      sync.Mutex
	servers map[uint16]*serviceHealthServer
	failing map[uint16]bool
	// listen is where the servers listen: nil for every address, else one listener per
	// address (as kube-proxy under a restricted --nodeport-addresses); an unspecified address
	// stands for every address of its family.
	listen []netip.Addr
}

type serviceHealthServer struct {
	state atomic.Pointer[healthCheck]
	srv   *http.Server
}

func newServiceHealthServers(log logr.Logger, healthy func() bool) *serviceHealthServers {
	return &serviceHealthServers{log: log, healthy: healthy, servers: map[uint16]*serviceHealthServer{}, failing: map[uint16]bool{}}
}

// Sync makes the running servers match want (port -> state) on the listen addresses (nil:
// every address): it starts missing ones, updates counts and stops the ones no longer wanted,
// or all of them when the addresses changed. A port that cannot be bound is retried on the next
// sync.
func (s *serviceHealthServers) Sync(want map[uint16]healthCheck, listen []netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(listen, s.listen) || (listen == nil) != (s.listen == nil) {
		s.closeAll()
		s.listen = listen
	}
	for port, srv := range s.servers {
		if _, ok := want[port]; !ok {
			_ = srv.srv.Close()
			delete(s.servers, port)
		}
	}
	for port := range s.failing {
		if _, ok := want[port]; !ok {
			delete(s.failing, port)
		}
	}
	for port, hc := range want {
		if srv, ok := s.servers[port]; ok {
			srv.state.Store(&hc)
			continue
		}
		ls, err := s.open(port)
		if err != nil {
			if !s.failing[port] {
				s.failing[port] = true
				s.log.Error(err, "Cannot open health check node port; retrying on every sync", "service", hc.Service, "port", port)
				if s.bindFailed != nil {
					s.bindFailed(hc.Service, port, err)
				}
			}
			continue
		}
		if s.failing[port] {
			delete(s.failing, port)
			s.log.Info("Opened health check node port", "service", hc.Service, "port", port)
		}
		srv := &serviceHealthServer{}
		srv.state.Store(&hc)
		srv.srv = &http.Server{Handler: s.handler(srv), ReadHeaderTimeout: 5 * time.Second}
		s.servers[port] = srv
		for _, l := range ls {
			go func() { _ = srv.srv.Serve(l) }()
		}
	}
}

// open listens on port at every listen address (all of them, or none on error).
func (s *serviceHealthServers) open(port uint16) ([]net.Listener, error) {
	if s.listen == nil {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(int(port)))
		if err != nil {
			return nil, err
		}
		return []net.Listener{l}, nil
	}
	var ls []net.Listener
	for _, a := range s.listen {
		network := "tcp4"
		if a.Is6() {
			network = "tcp6" // IPV6_V6ONLY: [::] does not take IPv4 too
		}
		l, err := net.Listen(network, netip.AddrPortFrom(a, port).String())
		if err != nil {
			for _, l := range ls {
				_ = l.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// Close stops every server.
func (s *serviceHealthServers) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeAll()
}

func (s *serviceHealthServers) closeAll() {
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

	mu       sync.Mutex
	families map[rules.Family]*familyHealth
}

// familyHealth is one IP family's sync record.
type familyHealth struct {
	lastUpdated time.Time // last successful sync of the family
	failing     time.Time // first failure since then; zero when the last sync succeeded
}

// familySynced records the outcome of one family's part of a sync.
func (h *proxyHealth) familySynced(f rules.Family, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.families == nil {
		h.families = map[rules.Family]*familyHealth{}
	}
	fh := h.families[f]
	if fh == nil {
		fh = &familyHealth{}
		h.families[f] = fh
	}
	now := time.Now()
	switch {
	case err == nil:
		fh.lastUpdated, fh.failing = now, time.Time{}
	case fh.failing.IsZero():
		fh.failing = now
	}
}

// familyStatus reports each family's health: a family is unhealthy once its syncs have been
// failing for longer than the timeout.
func (h *proxyHealth) familyStatus() (map[string]any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]any{}
	all := true
	for f, fh := range h.families {
		ok := fh.failing.IsZero() || time.Since(fh.failing) < h.timeout
		all = all && ok
		out[f.String()] = map[string]any{"healthy": ok, "lastUpdated": fh.lastUpdated}
	}
	return out, all
}

// healthy is false when a change has waited longer than the timeout for a successful sync, or
// when one family's syncs have been failing that long.
func (h *proxyHealth) healthy() bool {
	since := h.pending()
	if !since.IsZero() && time.Since(since) >= h.timeout {
		return false
	}
	_, ok := h.familyStatus()
	return ok
}

func (h *proxyHealth) handler(withNode bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		healthy := h.healthy()
		now := time.Now()
		last := time.Unix(0, h.lastUpdated.Load())
		if healthy {
			last = now // as kube-proxy: healthy answers report "now"
		}
		families, _ := h.familyStatus()
		body := map[string]any{"lastUpdated": last, "currentTime": now, "healthy": healthy, "families": families}
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
