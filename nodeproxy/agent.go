package nodeproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	kevents "k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/healthcheck"
	"github.com/portico-lb/portico/nodeproxy/membership"
	"github.com/portico-lb/portico/nodeproxy/netfilter"
	"github.com/portico-lb/portico/nodeproxy/nftables"
	"github.com/portico-lb/portico/nodeproxy/rules"
	"github.com/portico-lb/portico/nodeproxy/tracker"
	"github.com/portico-lb/portico/servicerules"
)

// eventsComponent reports the agent's Events; reasonHealthCheckFailed is kube-proxy's reason for
// a healthCheckNodePort that cannot be opened.
const (
	eventsComponent         = "portico-agent"
	reasonHealthCheckFailed = "FailedToStartServiceHealthcheck"
)

// Run runs the agent until ctx ends: it watches the cluster and keeps the node's netfilter rules,
// health-check servers, /healthz, /readyz, /livez and /metrics up to date (with
// --proxy-mode=none only its announcers: no rules, no health-check servers). With cfg.Cleanup
// it removes everything the agent installed instead, and returns. The logger comes from ctx.
func Run(ctx context.Context, cfg config.Agent) error {
	if cfg.Cleanup {
		return cleanup(ctx, cfg)
	}
	if err := checkAnnouncers(cfg.Announcers); err != nil {
		return err
	}
	if err := checkOtherProxy(ctx, cfg, nodeTraces{binaries: iptablesBinaries(cfg)}); err != nil {
		return err
	}
	if cfg.ProxyMode == config.ProxyModeNone {
		// Rules a dataplane mode left on the node (the mode was switched to none) would
		// answer for the Services beside the other proxy's, and never change again.
		if err := cleanup(ctx, cfg); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Cannot remove the rules a dataplane mode of the agent left; remove them with portico-agent --cleanup")
		}
	}
	if cfg.ProxyMode == config.ProxyModeNFTables {
		// Fail at startup, not at the first sync, on a kernel without what the mode needs.
		if err := nftables.Probe(); err != nil {
			return fmt.Errorf("proxy mode nftables (the default) cannot run on this kernel; run with --proxy-mode=iptables: %w", err)
		}
	}
	restCfg, err := cfg.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	var dyn dynamic.Interface
	if len(cfg.Announcers) > 0 {
		if dyn, err = dynamic.NewForConfig(restCfg); err != nil {
			return fmt.Errorf("creating dynamic client: %w", err)
		}
	}
	a, err := newAgent(ctx, cfg, cs, dyn)
	if err != nil {
		return err
	}
	a.apiHost = restCfg.Host
	// The ports first, before any call to the API server: /livez answers from here on, and a
	// port another process holds stops the agent at once, saying so.
	ls, err := a.listen()
	if err != nil {
		return err
	}
	return a.run(ctx, ls)
}

// cleanup removes both modes' state, so that switching modes leaves nothing behind. The other
// mode's failure is logged, not returned: a host may lack nf_tables or iptables altogether.
// With --proxy-mode=none neither is the agent's own: both failures are returned.
func cleanup(ctx context.Context, cfg config.Agent) error {
	ipt := netfilter.Cleanup(ctx, iptablesBinaries(cfg))
	nft := nftables.Cleanup(ctx)
	own, other := ipt, nft
	switch cfg.ProxyMode {
	case config.ProxyModeNFTables:
		own, other = nft, ipt
	case config.ProxyModeNone:
		return errors.Join(ipt, nft)
	}
	if other != nil {
		logr.FromContextOrDiscard(ctx).Error(other, "Cannot clean up the other proxy mode's state")
	}
	return own
}

// iptablesBinaries are the iptables binaries of each family.
func iptablesBinaries(cfg config.Agent) map[rules.Family]string {
	return map[rules.Family]string{rules.IPv4: cfg.IPTablesPath, rules.IPv6: cfg.IP6TablesPath}
}

// agent is the running dataplane: one tracker, one sync loop, and the consumers it drives.
type agent struct {
	cfg      config.Agent
	log      logr.Logger
	cs       kubernetes.Interface
	tracker  *tracker.Tracker
	loop     *syncLoop
	registry *prometheus.Registry
	health   *healthcheck.ProxyHealth
	dyn      dynamic.Interface
	// exitHold is, once the agent stops, how long the other agents are asked to keep this
	// node while it restarts (0: leave membership); see exitHoldFor.
	exitHold time.Duration
	// readDaemonSet reads the agent's DaemonSet (nil without --daemonset) and daemonSetWatch
	// follows it while the agent runs; uninstalling is their verdict once the agent stops
	// (uninstall.go).
	readDaemonSet  func(context.Context) (daemonSetState, error)
	daemonSetWatch *daemonSetWatch
	uninstalling   bool
	// membership is the running member (nil without --membership); agentPods tell its peers
	// (nil: every Node; peers.go).
	membership *membership.Membership
	agentPods  *agentPods
	// apiHost is the API server's address as the agent reaches it, for startup errors.
	apiHost string
}

// newAgent wires the tracker, the loop and the agent's own health; the consumers are created in
// run, once the Node (and so its IP families) is known. dyn (needed by announcers) watches
// AddressPools.
func newAgent(ctx context.Context, cfg config.Agent, cs kubernetes.Interface, dyn dynamic.Interface) (*agent, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	log := logr.FromContextOrDiscard(ctx)
	loop := newSyncLoop(log, cfg.NodeName, cfg.MinSyncPeriod, newLoopMetrics(reg))
	t, err := tracker.New(cs, cfg.NodeName, loop.notify, tracker.Options{
		AllNodes: cfg.Membership.Enabled || len(cfg.Announcers) > 0, Pools: dyn, IgnoreExcludeLB: cfg.IgnoreExcludeLB,
		Registerer: reg})
	if err != nil {
		return nil, err
	}
	loop.changes, loop.store = t, t.Store()
	a := &agent{cfg: cfg, log: log, cs: cs, tracker: t, loop: loop, registry: reg, dyn: dyn,
		readDaemonSet: daemonSetReader(cs, cfg.DaemonSet)}
	a.health = healthcheck.NewProxyHealth(2*cfg.SyncPeriod, t.PendingSince, a.nodeEligible, reg)
	loop.synced = a.health.MarkSynced
	return a, nil
}

// run is the agent's life: serve /livez, /readyz, /healthz and /metrics on ls at once, start
// the tracker and Events, wait for the caches, start the consumers of the sync loop (membership
// joins its peers in the background), then sync until ctx ends. Then it
// stops: as for a restart (rules in place, a restart hold, BGP routes kept for a graceful
// restart), or, when it sees it is being uninstalled (uninstall.go), withdrawing everything
// and, with UninstallCleanup, removing its rules last.
func (a *agent) run(parent context.Context, ls listeners) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	ctx = logr.NewContext(ctx, a.log)
	a.serveHTTP(ctx, cancel, ls)
	if a.dyn != nil {
		// Without the CRD (or the RBAC to list it) the pool informer would never sync and the
		// agent would wait silently: say so at startup instead.
		if _, err := a.dyn.Resource(tracker.AddressPoolsResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return poolsUnavailable(a.apiHost, err)
		}
	}
	a.tracker.Start(ctx.Done())
	// The DaemonSet's watch outlives ctx, which a signal ends, until the exit's decision is
	// taken: a deletion seen while deciding still counts.
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	a.daemonSetWatch = startDaemonSetWatch(a.cs, a.cfg.DaemonSet, a.log, stopWatch)
	var synced []cache.InformerSynced
	if a.cfg.Membership.Enabled {
		ap, err := newAgentPods(ctx, a.cs, a.cfg.DaemonSet)
		if err != nil {
			a.log.Error(err, "Every Node is a membership peer: cannot tell which run an agent")
		}
		if ap != nil {
			a.agentPods = ap
			ap.start(ctx.Done())
			synced = append(synced, ap.informer.HasSynced)
		}
	}
	ev := a.startEvents(ctx)
	defer ev.stop()
	a.log.Info("Waiting for informer caches")
	if !a.tracker.WaitForSync(ctx.Done()) || !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	a.health.CachesSynced()
	var stops stack
	defer stops.run()
	if err := a.startConsumers(ctx, ev, &stops); err != nil {
		return err
	}
	a.syncUntilDone(ctx)
	signalled := parent.Err() != nil
	a.uninstalling = a.uninstallingAt(signalled, uninstallCheckBudget)
	a.exitHold = a.exitHoldFor(signalled)
	// The announcers withdraw (or not) and membership is left before the rules go, so that
	// no VIP draws traffic to a node without them.
	stops.run()
	if !a.uninstalling || !a.cfg.UninstallCleanup {
		a.log.Info("Stopped; rules stay in place", "restartHold", a.exitHold, "uninstalling", a.uninstalling)
		return nil
	}
	if err := a.removeRules(); err != nil {
		return fmt.Errorf("removing the rules at uninstall: %w", err)
	}
	a.log.Info("Uninstalled: announcements withdrawn, membership left, rules removed")
	return nil
}

// exitHoldFor is how long the other agents should keep this node as the owner of its VIPs
// once it exits: --membership-restart-hold when the agent was told to stop (SIGTERM: a pod
// replaced by an upgrade, a restart), since the rules stay in the kernel and keep serving;
// 0 (leave, the others take over at once) when it stops on its own failure, when it is being
// uninstalled, or when its Node is cordoned or being deleted: then the node is going away
// (drain, maintenance), not the agent restarting.
func (a *agent) exitHoldFor(signalled bool) time.Duration {
	if !signalled || !a.cfg.Membership.Enabled || a.uninstalling {
		return 0
	}
	n := a.tracker.Store().Node()
	if n == nil || n.Spec.Unschedulable || servicerules.NodeBeingDeleted(n) {
		return 0
	}
	return a.cfg.Membership.RestartHold
}

// stack holds stop functions, run last-in first-out, once.
type stack []func()

func (s *stack) push(f func()) { *s = append(*s, f) }

func (s *stack) run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
	*s = nil
}

// agentEvents are the agent's Events: the recorder (nil without a client) and the report of a
// health-check port that cannot be opened.
type agentEvents struct {
	recorder   kevents.EventRecorder
	bindFailed func(svc types.NamespacedName, port uint16, err error)
	stop       func()
}

// startEvents starts recording Events to the API server (nothing without a client).
func (a *agent) startEvents(ctx context.Context) agentEvents {
	ev := agentEvents{bindFailed: func(types.NamespacedName, uint16, error) {}, stop: func() {}}
	if a.cs == nil {
		return ev
	}
	broadcaster := kevents.NewBroadcaster(&kevents.EventSinkImpl{Interface: a.cs.EventsV1()})
	ev.recorder = broadcaster.NewRecorder(scheme.Scheme, eventsComponent)
	ev.bindFailed = func(svc types.NamespacedName, port uint16, err error) {
		ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name}
		ev.recorder.Eventf(ref, nil, corev1.EventTypeWarning, reasonHealthCheckFailed, "Listen",
			"node %s failed to start healthcheck %q on port %d: %v", a.cfg.NodeName, svc.String(), port, err)
	}
	broadcaster.StartRecordingToSink(ctx.Done())
	ev.stop = broadcaster.Shutdown
	return ev
}

// startConsumers creates the sync loop's consumers in the order they run: netfilter, the
// health checks (they listen where NodePorts answer, known after the proxier's sync), the
// ExternalIPsRefused Events (unless the externalIPs policy is allow; externalips.go), then
// membership and the announcers, so that the rules (without the endpoints of dead nodes) are in
// place before a VIP draws traffic here. Their stop functions are pushed on stops: at exit the
// announcers stop answering before membership is left. With --proxy-mode=none there is
// neither netfilter nor health checks: the node's other service proxy does both.
func (a *agent) startConsumers(ctx context.Context, ev agentEvents, stops *stack) error {
	a.loop.consumers = nil
	if a.cfg.ProxyMode != config.ProxyModeNone {
		if err := a.startDataplane(ctx, ev, stops); err != nil {
			return err
		}
	}
	if a.cfg.Membership.Enabled {
		leave, err := a.startMembership(ctx, ev)
		if err != nil {
			return err
		}
		stops.push(leave)
	}
	for _, name := range a.cfg.Announcers {
		c, stop, err := announcers[name](ctx, announcerDeps{cfg: a.cfg, log: a.log, recorder: ev.recorder, registry: a.registry,
			cs: a.cs, dyn: a.dyn, resync: a.loop.requestFull, uninstalling: a.isUninstalling, membership: a.membership})
		if err != nil {
			return fmt.Errorf("starting announcer %s: %w", name, err)
		}
		stops.push(stop)
		a.loop.consumers = append(a.loop.consumers, c)
	}
	return nil
}

// startDataplane creates the programmer of --proxy-mode (following the Node's families), the
// health-check servers and the ExternalIPsRefused Events, the first consumers of the sync loop.
func (a *agent) startDataplane(ctx context.Context, ev agentEvents, stops *stack) error {
	proxier, err := a.dataplane()
	if err != nil {
		return err
	}
	if c, ok := proxier.(interface{ Close() error }); ok {
		// The nftables proxier's netlink sockets, kept open between syncs; the rules stay.
		stops.push(func() {
			if err := c.Close(); err != nil {
				a.log.Error(err, "Closing the dataplane's connections")
			}
		})
	}
	hcServers := healthcheck.NewServers(a.log.WithName("healthcheck"), healthcheck.Options{
		Healthy: a.health.Healthy, BindFailed: ev.bindFailed, Families: proxier.Families, Addresses: proxier.HealthCheckAddresses})
	stops.push(hcServers.Close)
	rules := &followNode{dataplane: proxier, forget: a.health.ForgetFamily}
	a.loop.consumers = []Consumer{rules, hcServers}
	a.loop.rules = rules
	if a.cfg.ExternalIPs.Policy != config.ExternalIPsAllow && a.cs != nil {
		a.loop.consumers = append(a.loop.consumers, newExternalIPsEvents(ctx, a.log.WithName("externalips"), a.cs, a.cfg.NodeName, a.cfg.ExternalIPs))
	}
	return nil
}

// dataplane is what the agent needs of a --proxy-mode's programmer: a consumer of the sync
// loop that says which families it programs (and changes them: families.go) and where health
// checks listen.
type dataplane interface {
	Consumer
	familyProgrammer
	HealthCheckAddresses() []netip.Addr
}

var (
	_ dataplane = (*netfilter.Proxier)(nil)
	_ dataplane = (*nftables.Proxier)(nil)
)

// dataplane creates the programmer of cfg.ProxyMode for the node's families.
func (a *agent) dataplane() (dataplane, error) {
	fams := a.families()
	if a.cfg.ProxyMode == config.ProxyModeNFTables {
		return nftables.New(nftables.Options{
			ClusterCIDRs:    a.cfg.ClusterCIDRs,
			NodePortCIDRs:   a.cfg.NodePortAddresses.CIDRs,
			NodePortPrimary: a.cfg.NodePortAddresses.Primary,
			MasqueradeAll:   a.cfg.MasqueradeAll,
			MasqueradeBit:   a.cfg.MasqueradeBit,
			Families:        fams,
			Conntrack:       netfilter.NetlinkConntrack{},
			Registerer:      a.registry,
			FamilySynced:    a.health.FamilySynced,
			Latency:         tracker.NewProgrammingLatency(a.registry),
			ExternalIPs:     a.cfg.ExternalIPs,
		}), nil
	}
	nfs, err := a.netfilters(fams)
	if err != nil {
		return nil, err
	}
	opts := a.netfilterOptions(nfs)
	opts.NewNetfilter = a.netfilter
	return netfilter.New(opts), nil
}

// netfilterOptions are the proxier's options from the agent's configuration.
func (a *agent) netfilterOptions(nfs map[rules.Family]netfilter.Netfilter) netfilter.Options {
	return netfilter.Options{
		ClusterCIDRs:    a.cfg.ClusterCIDRs,
		NodePortCIDRs:   a.cfg.NodePortAddresses.CIDRs,
		NodePortPrimary: a.cfg.NodePortAddresses.Primary,
		MasqueradeAll:   a.cfg.MasqueradeAll,
		MasqueradeBit:   a.cfg.MasqueradeBit,
		Netfilters:      nfs,
		Conntrack:       netfilter.NetlinkConntrack{},
		Registerer:      a.registry,
		FamilySynced:    a.health.FamilySynced,
		Latency:         tracker.NewProgrammingLatency(a.registry),
		ExternalIPs:     a.cfg.ExternalIPs,
	}
}

// listeners are the agent's bound HTTP ports (nil: disabled).
type listeners struct{ health, metrics net.Listener }

// listen binds the addresses of /healthz (with /livez and /readyz) and /metrics ("0" or ""
// disables one). A port in use fails naming the address, the process that usually holds it
// and the setting that moves it.
func (a *agent) listen() (listeners, error) {
	var ls listeners
	var err error
	if addr := a.cfg.HealthzBindAddress; addr != "" && addr != "0" {
		if ls.health, err = net.Listen("tcp", addr); err != nil {
			return ls, bindError("healthzBindAddress", "--healthz-bind-address", "agent.healthzPort", addr, err)
		}
	}
	if addr := a.cfg.MetricsBindAddress; addr != "" && addr != "0" {
		if ls.metrics, err = net.Listen("tcp", addr); err != nil {
			if ls.health != nil {
				ls.health.Close()
			}
			return ls, bindError("metricsBindAddress", "--metrics-bind-address", "agent.metricsBindAddress", addr, err)
		}
	}
	return ls, nil
}

// bindError explains a failure to listen on addr, set by flag (configuration key key, chart
// value value). kube-proxy serves the same two ports (10256 and 10249): an agent started beside
// it, or beside another agent, finds them taken.
func bindError(key, flag, value, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("cannot listen on %s: another process holds the port (kube-proxy serves the same ones, 10256 and 10249); "+
			"stop it, or set %s (config file: %s, chart: %s) to a free address: %w", addr, flag, key, value, err)
	}
	return fmt.Errorf("cannot listen on %s (set by %s, config file: %s, chart: %s): %w", addr, flag, key, value, err)
}

// serveHTTP serves /healthz, /readyz and /livez, and /metrics, on ls until ctx ends; a server
// that fails stops the agent through cancel.
func (a *agent) serveHTTP(ctx context.Context, cancel context.CancelFunc, ls listeners) {
	errc := make(chan error, 2)
	if ls.health != nil {
		mux := http.NewServeMux()
		mux.Handle("/healthz", a.health.Handler(healthcheck.Healthz))
		mux.Handle("/readyz", a.health.Handler(healthcheck.Readyz))
		mux.Handle("/livez", a.health.Handler(healthcheck.Livez))
		go func() { errc <- serve(ctx, ls.health, mux) }()
	}
	if ls.metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
		go func() { errc <- serve(ctx, ls.metrics, mux) }()
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
}

// syncUntilDone runs the sync loop until ctx ends: a full sync first, then one every
// SyncPeriod, and a sync for every batch of changes in between.
func (a *agent) syncUntilDone(ctx context.Context) {
	a.loop.requestFull()
	go func() {
		tick := time.NewTicker(a.cfg.SyncPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				a.loop.requestFull()
			}
		}
	}()
	go func() {
		<-ctx.Done()
		a.loop.queue.ShutDown()
	}()
	for a.loop.processNext(ctx) {
	}
}

// families are the IP families to program at start: those of the Node's addresses, IPv4 when
// the Node is unknown or has none (families.go: they follow the Node from then on).
func (a *agent) families() []rules.Family {
	n := a.tracker.Store().Node()
	fams := nodeFamilies(n)
	if len(fams) == 0 {
		a.log.Info("Node unknown or without addresses; programming IPv4 until it has some", "node", a.cfg.NodeName, "found", n != nil)
		fams = []rules.Family{rules.IPv4}
	}
	return fams
}

// netfilters creates the iptables seams for fams.
func (a *agent) netfilters(fams []rules.Family) (map[rules.Family]netfilter.Netfilter, error) {
	out := map[rules.Family]netfilter.Netfilter{}
	for _, fam := range fams {
		nf, err := a.netfilter(fam)
		if err != nil {
			return nil, err
		}
		out[fam] = nf
	}
	return out, nil
}

// netfilter creates the iptables seam of fam.
func (a *agent) netfilter(fam rules.Family) (netfilter.Netfilter, error) {
	bin := a.cfg.IPTablesPath
	if fam == rules.IPv6 {
		bin = a.cfg.IP6TablesPath
	}
	return netfilter.NewExec(fam, bin)
}

// nodeEligible is false when the node is unknown or being deleted (KEP-3836), so that load
// balancers drain it.
func (a *agent) nodeEligible() bool {
	n := a.tracker.Store().Node()
	return n != nil && !servicerules.NodeBeingDeleted(n)
}

// serve runs handler on l until ctx ends.
func serve(ctx context.Context, l net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", l.Addr(), err)
	}
	return nil
}
