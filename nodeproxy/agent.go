package nodeproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// toBeDeletedTaint marks a node the cluster autoscaler is removing.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// eventsComponent reports the agent's Events; reasonHealthCheckFailed is kube-proxy's reason for
// a healthCheckNodePort that cannot be opened.
const (
	eventsComponent         = "portico-agent"
	reasonHealthCheckFailed = "FailedToStartServiceHealthcheck"
)

func logFromContext(ctx context.Context) logr.Logger { return logr.FromContextOrDiscard(ctx) }

// Run runs the agent until ctx ends: it watches the cluster and keeps the node's netfilter rules,
// health-check servers, /healthz, /livez and /metrics up to date. With cfg.Cleanup it removes
// everything the agent installed instead, and returns. The logger comes from ctx.
func Run(ctx context.Context, cfg config.Agent) error {
	if cfg.Cleanup {
		return Cleanup(ctx, cfg)
	}
	restCfg, err := cfg.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	a, err := newAgent(ctx, cfg, cs, nil, netlinkConntrack{})
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// agent is the running dataplane: one tracker, one sync loop, one proxier per family.
type agent struct {
	cfg       config.Agent
	log       logr.Logger
	tracker   *tracker
	queue     workqueue.TypedRateLimitingInterface[string]
	limiter   *rate.Limiter
	proxiers  []*familyProxier
	conntrack Conntrack
	metrics   *metrics
	registry  *prometheus.Registry
	health    *proxyHealth
	hcServers *serviceHealthServers
	startInf  func(<-chan struct{})
	// startEvents and stopEvents run the Event broadcaster (nil without a client).
	startEvents func(<-chan struct{})
	stopEvents  func()

	fullPending atomic.Bool
}

// newAgent wires an agent. netfilters overrides the iptables of each family (tests); nil uses
// the binaries from cfg for the families the Node has addresses of.
func newAgent(ctx context.Context, cfg config.Agent, cs kubernetes.Interface, netfilters map[rules.Family]Netfilter, ct Conntrack) (*agent, error) {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "portico-agent-sync"})
	t, factory, nodeFactory, err := newTracker(cs, cfg.NodeName, queue)
	if err != nil {
		return nil, err
	}
	limit := rate.Inf
	if cfg.MinSyncPeriod > 0 {
		limit = rate.Every(cfg.MinSyncPeriod)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a := &agent{
		cfg: cfg, log: logFromContext(ctx), tracker: t, queue: queue,
		limiter:   rate.NewLimiter(limit, 1),
		conntrack: ct, metrics: newMetrics(reg), registry: reg,
		startInf: func(stop <-chan struct{}) { factory.Start(stop); nodeFactory.Start(stop) },
	}
	a.health = &proxyHealth{timeout: 2 * cfg.SyncPeriod, pending: t.pendingSince, eligible: a.nodeEligible, metrics: a.metrics}
	a.hcServers = newServiceHealthServers(a.log.WithName("healthcheck"), a.health.healthy)
	if cs != nil {
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
		recorder := broadcaster.NewRecorder(scheme.Scheme, eventsComponent)
		a.hcServers.bindFailed = func(svc types.NamespacedName, port uint16, err error) {
			ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name}
			recorder.Eventf(ref, nil, corev1.EventTypeWarning, reasonHealthCheckFailed, "Listen",
				"node %s failed to start healthcheck %q on port %d: %v", cfg.NodeName, svc.String(), port, err)
		}
		a.startEvents = broadcaster.StartRecordingToSink
		a.stopEvents = broadcaster.Shutdown
	}
	a.proxiers = nil
	for _, fam := range []rules.Family{rules.IPv4, rules.IPv6} {
		var nf Netfilter
		if netfilters != nil {
			if nf = netfilters[fam]; nf == nil {
				continue
			}
		}
		a.proxiers = append(a.proxiers, &familyProxier{family: fam, nf: nf, baseCfg: a.rulesConfig(fam),
			npCIDRs: familyPrefixes(cfg.NodePortAddresses, fam), npPrimary: slices.Contains(cfg.NodePortAddresses, config.NodePortPrimary)})
	}
	return a, nil
}

func (a *agent) rulesConfig(f rules.Family) rules.Config {
	return rules.Config{
		Family:         f,
		MasqueradeMark: 1 << a.cfg.MasqueradeBit,
		MasqueradeAll:  a.cfg.MasqueradeAll,
		ClusterCIDRs:   familyPrefixes(a.cfg.ClusterCIDRs, f),
	}
}

func familyPrefixes(list []string, f rules.Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range config.Prefixes(list) {
		if f.Contains(p.Addr()) {
			out = append(out, p)
		}
	}
	return out
}

func (a *agent) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.startInf(ctx.Done())
	if a.startEvents != nil {
		a.startEvents(ctx.Done())
		defer a.stopEvents()
	}
	a.log.Info("Waiting for informer caches")
	if !cache.WaitForCacheSync(ctx.Done(), a.tracker.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	if err := a.setupFamilies(); err != nil {
		return err
	}
	defer a.hcServers.Close()

	errc := make(chan error, 2)
	if addr := a.cfg.HealthzBindAddress; addr != "" && addr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/healthz", a.health.handler(true))
		mux.Handle("/livez", a.health.handler(false))
		go func() { errc <- serveHTTP(ctx, addr, mux) }()
	}
	if addr := a.cfg.MetricsBindAddress; addr != "" && addr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
		go func() { errc <- serveHTTP(ctx, addr, mux) }()
	}
	go func() {
		select {
		case err := <-errc:
			if err != nil {
				a.log.Error(err, "HTTP server failed; stopping")
				cancel()
			}
		case <-ctx.Done():
		}
	}()

	// A full sync first, then one every SyncPeriod.
	a.fullPending.Store(true)
	a.queue.Add(syncKey)
	go func() {
		tick := time.NewTicker(a.cfg.SyncPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				a.fullPending.Store(true)
				a.queue.Add(syncKey)
			}
		}
	}()
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	for a.processNext(ctx) {
	}
	a.log.Info("Stopped; rules stay in place")
	return nil
}

// setupFamilies creates the iptables seams for the families this node has addresses of
// (IPv4 when the Node is not known).
func (a *agent) setupFamilies() error {
	if a.proxiers[0].nf != nil {
		return nil // injected
	}
	want := map[rules.Family]bool{rules.IPv4: true}
	if n := a.tracker.thisNode(); n != nil {
		want = map[rules.Family]bool{}
		for _, ad := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(ad.Address); err == nil && (ad.Type == corev1.NodeInternalIP || ad.Type == corev1.NodeExternalIP) {
				want[familyOf(ip)] = true
			}
		}
		if len(want) == 0 {
			want[rules.IPv4] = true
		}
	} else {
		a.log.Info("Node not found; programming IPv4 only", "node", a.cfg.NodeName)
	}
	var keep []*familyProxier
	for _, p := range a.proxiers {
		if !want[p.family] {
			continue
		}
		bin := a.cfg.IPTablesPath
		if p.family == rules.IPv6 {
			bin = a.cfg.IP6TablesPath
		}
		nf, err := newExecNetfilter(p.family, bin)
		if err != nil {
			return err
		}
		p.nf = nf
		keep = append(keep, p)
	}
	a.proxiers = keep
	return nil
}

func familyOf(ip netip.Addr) rules.Family {
	if ip.Is4() || ip.Is4In6() {
		return rules.IPv4
	}
	return rules.IPv6
}

// processNext runs one sync from the queue, at most one per MinSyncPeriod.
func (a *agent) processNext(ctx context.Context) bool {
	key, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(key)
	if err := a.limiter.Wait(ctx); err != nil {
		return false
	}
	if err := a.sync(ctx); err != nil {
		a.log.Error(err, "Sync failed; retrying with a full sync")
		a.fullPending.Store(true)
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// sync is one pass of the loop: take the pending changes and apply them to every family.
func (a *agent) sync(ctx context.Context) error {
	start := time.Now()
	full := a.fullPending.Swap(false)
	changed, nodeChanged := a.tracker.take()
	full = full || nodeChanged
	var keys []types.NamespacedName
	if full {
		all, err := a.tracker.allServices()
		if err != nil {
			a.tracker.restore(changed)
			return err
		}
		keys = all
	} else {
		for k := range changed {
			keys = append(keys, k)
		}
	}
	wasFull, written, noLocalExternal, noLocalInternal := false, 0, 0, 0
	var errs []error
	for _, p := range a.proxiers {
		res, err := p.sync(ctx, a.tracker, keys, full, a.conntrack, a.metrics)
		a.health.familySynced(p.family, err)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wasFull = wasFull || res.full
		if len(res.repaired) > 0 {
			a.log.V(1).Info("Full sync wrote chains (first sync or drift)", "family", p.family.String(), "chains", res.repaired)
		}
		noLocalExternal += res.noLocalExternal
		noLocalInternal += res.noLocalInternal
		written += res.chainsWritten
		kind := "partial"
		if res.full {
			kind = "full"
		}
		a.metrics.chainsRestored.WithLabelValues(p.family.String(), kind).Add(float64(res.chainsWritten))
		a.metrics.rules.WithLabelValues(p.family.String(), rules.TableNAT).Set(float64(res.nat))
		a.metrics.rules.WithLabelValues(p.family.String(), rules.TableFilter).Set(float64(res.filt))
	}
	if err := errors.Join(errs...); err != nil {
		a.tracker.restore(changed)
		return err
	}
	a.hcServers.Sync(a.healthChecks(), a.healthCheckAddresses())
	elapsed := time.Since(start).Seconds()
	a.metrics.syncDuration.Observe(elapsed)
	if wasFull {
		a.metrics.fullDuration.Observe(elapsed)
	} else {
		a.metrics.partialDuration.Observe(elapsed)
	}
	a.metrics.noLocalEndpoints.WithLabelValues("external").Set(float64(noLocalExternal))
	a.metrics.noLocalEndpoints.WithLabelValues("internal").Set(float64(noLocalInternal))
	a.metrics.lastSync.SetToCurrentTime()
	a.health.lastUpdated.Store(time.Now().UnixNano())
	a.log.V(1).Info("Synced", "full", wasFull, "services", len(keys), "chainsWritten", written, "seconds", elapsed)
	return nil
}

// healthChecks computes what every healthCheckNodePort reports: distinct ready local endpoint
// IPs over the Service's ports and families.
func (a *agent) healthChecks() map[uint16]healthCheck {
	ips := map[uint16]map[netip.Addr]bool{}
	out := map[uint16]healthCheck{}
	for _, p := range a.proxiers {
		for key, ports := range p.ports {
			for _, sp := range ports {
				if sp.HealthCheckNodePort == 0 {
					continue
				}
				hc := sp.HealthCheckNodePort
				if ips[hc] == nil {
					ips[hc] = map[netip.Addr]bool{}
				}
				for _, e := range sp.Endpoints {
					if e.Local && e.Ready {
						ips[hc][e.IP] = true
					}
				}
				out[hc] = healthCheck{Service: key, LocalEndpoints: len(ips[hc])}
			}
		}
	}
	return out
}

// healthCheckAddresses is where healthCheckNodePorts listen, like NodePorts: nil (every
// address) unless --nodeport-addresses restricts a family; then the addresses it selects for
// that family, and the unspecified address (the family's wildcard) for an unrestricted one.
func (a *agent) healthCheckAddresses() []netip.Addr {
	var out []netip.Addr
	restricted := false
	for _, p := range a.proxiers {
		switch {
		case p.nodePorts != nil:
			restricted = true
			out = append(out, p.nodePorts...)
		case p.family == rules.IPv6:
			out = append(out, netip.IPv6Unspecified())
		default:
			out = append(out, netip.IPv4Unspecified())
		}
	}
	if !restricted {
		return nil
	}
	if out == nil {
		out = []netip.Addr{} // restricted to no address: no listener
	}
	return out
}

// nodeEligible is false when the node is unknown or being deleted (KEP-3836), so that load
// balancers drain it.
func (a *agent) nodeEligible() bool {
	n := a.tracker.thisNode()
	if n == nil || n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}
