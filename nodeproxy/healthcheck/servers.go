package healthcheck

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/serviceports"
	"github.com/portico-lb/portico/nodeproxy/tracker"
)

// healthCheck is what one healthCheckNodePort reports.
type healthCheck struct {
	Service        types.NamespacedName
	LocalEndpoints int
	port           uint16
}

// Servers runs one HTTP server per healthCheckNodePort of the externalTrafficPolicy: Local
// Services: 200 when the Service has a ready endpoint on this node and the agent is healthy,
// else 503, for any path. It is a consumer of the agent's sync loop (Sync); its servers are
// also driven directly by SyncServers.
type Servers struct {
	log     logr.Logger
	healthy func() bool
	// bindFailed reports a port that cannot be opened, once until it opens (nil: log only).
	bindFailed func(svc types.NamespacedName, port uint16, err error)
	// families are the IP families whose endpoints count; addresses tells where to listen.
	families  func() []rules.Family
	addresses func() []netip.Addr
	// byService is what each tracked Service's health check reports.
	byService map[types.NamespacedName]healthCheck

	mu      sync.Mutex
	servers map[uint16]*serviceHealthServer
	failing map[uint16]bool
	// listen is where the servers listen: nil for every address, else one listener per
	// address (as kube-proxy under a restricted --nodeport-addresses); an unspecified address
	// stands for every address of its family.
	listen []netip.Addr
}

type serviceHealthServer struct {
	state     atomic.Pointer[healthCheck]
	srv       *http.Server
	listeners []net.Listener
}

// stop closes the server and its listeners itself: http.Server.Close only closes the listeners
// its Serve goroutines have taken up, and a goroutine not yet scheduled leaves its port taking
// connections (and bound, so that reopening it on other addresses fails) until it runs.
func (h *serviceHealthServer) stop() {
	_ = h.srv.Close()
	for _, l := range h.listeners {
		_ = l.Close()
	}
}

// Options configure Servers.
type Options struct {
	// Healthy is the agent's health (ProxyHealth.Healthy): a health check answers 503 without it.
	Healthy func() bool
	// BindFailed reports a port that cannot be opened, once until it opens (nil: log only).
	BindFailed func(svc types.NamespacedName, port uint16, err error)
	// Families tells, on every sync, the IP families whose local endpoints count: those the
	// agent programs, which follow the Node's addresses (nil: IPv4).
	Families func() []rules.Family
	// Addresses tells, on every sync, where the servers listen: nil for every address (see
	// netfilter.Proxier.HealthCheckAddresses). Nil Addresses: every address.
	Addresses func() []netip.Addr
}

// NewServers returns Servers with none running.
func NewServers(log logr.Logger, opts Options) *Servers {
	addresses := opts.Addresses
	if addresses == nil {
		addresses = func() []netip.Addr { return nil }
	}
	families := opts.Families
	if families == nil {
		families = func() []rules.Family { return []rules.Family{rules.IPv4} }
	}
	return &Servers{log: log, healthy: opts.Healthy, bindFailed: opts.BindFailed, families: families, addresses: addresses,
		byService: map[types.NamespacedName]healthCheck{}, servers: map[uint16]*serviceHealthServer{}, failing: map[uint16]bool{}}
}

// Name names the consumer in logs.
func (s *Servers) Name() string { return "healthcheck" }

// Sync recomputes the health checks of st's changed Services (all on a full sync) and makes
// the running servers match. A port that cannot be opened is not a sync failure: it is reported
// once and retried on the next sync.
func (s *Servers) Sync(_ context.Context, st *tracker.State) error {
	if st.Full {
		clear(s.byService)
	}
	node := serviceports.NodeOf(st.NodeName, st.Node)
	for _, key := range st.Changed {
		delete(s.byService, key)
		svc, slices, err := st.Service(key)
		if err != nil {
			return err
		}
		if svc == nil || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || svc.Spec.HealthCheckNodePort == 0 {
			continue
		}
		if hc, ok := s.healthCheckOf(key, svc, slices, node); ok {
			s.byService[key] = hc
		}
	}
	want := make(map[uint16]healthCheck, len(s.byService))
	for _, hc := range s.byService {
		want[hc.port] = hc
	}
	s.SyncServers(want, s.addresses())
	return nil
}

// healthCheckOf counts the distinct ready local endpoint IPs over the Service's ports and the
// families, as the rules see them.
func (s *Servers) healthCheckOf(key types.NamespacedName, svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node serviceports.Node) (healthCheck, bool) {
	ips := map[netip.Addr]bool{}
	found := false
	var port uint16
	for _, fam := range s.families() {
		for _, sp := range serviceports.ServicePorts(svc, slices, node, fam) {
			if sp.HealthCheckNodePort == 0 {
				continue
			}
			found, port = true, sp.HealthCheckNodePort
			for _, e := range sp.Endpoints {
				if e.Local && e.Ready {
					ips[e.IP] = true
				}
			}
		}
	}
	return healthCheck{Service: key, LocalEndpoints: len(ips), port: port}, found
}

// SyncServers makes the running servers match want (port -> state) on the listen addresses (nil:
// every address): it starts missing ones, updates counts and stops the ones no longer wanted,
// or all of them when the addresses changed. A port that cannot be bound is retried on the next
// sync.
func (s *Servers) SyncServers(want map[uint16]healthCheck, listen []netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(listen, s.listen) || (listen == nil) != (s.listen == nil) {
		s.closeAll()
		s.listen = listen
	}
	for port, srv := range s.servers {
		if _, ok := want[port]; !ok {
			srv.stop()
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
		srv := &serviceHealthServer{listeners: ls}
		srv.state.Store(&hc)
		srv.srv = &http.Server{Handler: s.handler(srv), ReadHeaderTimeout: 5 * time.Second}
		s.servers[port] = srv
		for _, l := range ls {
			go func() { _ = srv.srv.Serve(l) }()
		}
	}
}

// open listens on port at every listen address (all of them, or none on error).
func (s *Servers) open(port uint16) ([]net.Listener, error) {
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
func (s *Servers) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeAll()
}

func (s *Servers) closeAll() {
	for port, srv := range s.servers {
		srv.stop()
		delete(s.servers, port)
	}
}

func (s *Servers) handler(srv *serviceHealthServer) http.Handler {
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
