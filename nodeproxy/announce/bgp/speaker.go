package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Speaker.
type Options struct {
	// RouterID is the BGP identifier: the node's IPv4 address (an IPv6-only node must still pick
	// a unique 32-bit value written as an IPv4 address).
	RouterID netip.Addr
	// ASN is the speaker's global AS number; every Peer's MyASN overrides it on its session, so
	// it only matters to GoBGP's bookkeeping. 0 means 64512.
	ASN uint32
	// ListenPort, when not zero, accepts sessions the peers open on this TCP port (179 is the
	// standard). Zero: the speaker only dials out, and never competes for port 179 with another
	// BGP daemon on the node.
	ListenPort uint16
	// Logger receives GoBGP's log (at V(1) for its info messages) and the speaker's own.
	Logger logr.Logger
	// Registerer, when not nil, gets the speaker's Prometheus collector (see Collector).
	Registerer prometheus.Registerer
}

// defaultASN is Options.ASN's default: the first 16-bit private AS number.
const defaultASN = 64512

// Speaker is the BGP speaker of one node: GoBGP running in process, fed the full desired set of
// peers and advertisements each time. Its methods are safe for concurrent use.
type Speaker struct {
	log         logr.Logger
	srv         *server.BgpServer
	withdrawals prometheus.Counter
	recreations prometheus.Counter // peers recreated by the BFD guard (bfdguard.go)

	mu       sync.Mutex // serialises SetPeers, SetAdvertisements and Stop
	peers    map[netip.Addr]Peer
	advs     map[netip.Prefix]Advertisement
	paths    map[netip.Prefix]*apiutil.Path
	exported map[netip.Addr]map[netip.Prefix]bool // each peer's export prefix set (export.go)
	stopped  bool
	// restarting is true until the first SetPeers returns: peers added until then announce in
	// their OPEN that this speaker has just restarted (see apiPeer).
	restarting bool
	// addedRestarting holds the peers added while restarting (the BFD guard re-adds them so).
	addedRestarting map[netip.Addr]bool

	stopGuard context.CancelFunc // ends guardBFD (bfdguard.go)
}

// New starts a speaker with no peers and no advertisements. Its BFD endpoint listens on UDP
// 3784 of the namespace New runs in (GoBGP starts it with the server), and on Options.ListenPort
// for BGP if set. Stop it with Stop.
func New(ctx context.Context, opts Options) (*Speaker, error) {
	if !opts.RouterID.Is4() {
		return nil, fmt.Errorf("router ID %v: want an IPv4 address", opts.RouterID)
	}
	asn := opts.ASN
	if asn == 0 {
		asn = defaultASN
	}
	s := &Speaker{
		log: opts.Logger,
		withdrawals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "withdrawals_total",
			Help: "Prefixes withdrawn: dropped from the desired advertisements, or withdrawn by a graceful stop.",
		}),
		recreations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "peer_recreations_total",
			Help: "Peers deleted and re-added because their BFD session went down while the BGP session was not established (a stale GoBGP reset).",
		}),
		peers:           map[netip.Addr]Peer{},
		advs:            map[netip.Prefix]Advertisement{},
		paths:           map[netip.Prefix]*apiutil.Path{},
		exported:        map[netip.Addr]map[netip.Prefix]bool{},
		restarting:      true,
		addedRestarting: map[netip.Addr]bool{},
	}
	level := &slog.LevelVar{}
	level.Set(slog.LevelInfo)
	s.srv = server.NewBgpServer(server.LoggerOption(slog.New(logr.ToSlogHandler(opts.Logger)), level))
	go s.srv.Serve()

	listen := int32(-1) // GoBGP: negative means no listener
	if opts.ListenPort != 0 {
		listen = int32(opts.ListenPort)
	}
	err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:        asn,
		RouterId:   opts.RouterID.String(),
		ListenPort: listen,
	}})
	if err != nil {
		s.srv.Stop()
		return nil, fmt.Errorf("starting BGP: %w", err)
	}
	if err := s.setImportPolicy(ctx); err != nil {
		s.srv.Stop()
		return nil, fmt.Errorf("setting the import policy: %w", err)
	}
	if err := s.setExportDefault(ctx); err != nil {
		s.srv.Stop()
		return nil, fmt.Errorf("setting the export policy: %w", err)
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.Collector()); err != nil {
			s.srv.Stop()
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	gctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopGuard = stop
	go s.guardBFD(gctx)
	return s, nil
}

// importPolicy is the name of the speaker's import policy.
const importPolicy = "portico-local-only"

// setImportPolicy makes the speaker learn nothing: the global import policy (which GoBGP
// applies to locally added paths too) accepts local paths and rejects every received route, so
// no route from one peer is ever passed on to another.
func (s *Speaker) setImportPolicy(ctx context.Context) error {
	policy := &api.Policy{Name: importPolicy, Statements: []*api.Statement{{
		Name:       importPolicy + "-accept",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
	}}}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: policy}); err != nil {
		return err
	}
	return s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: importPolicy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}})
}

// ErrStopped is returned by calls after Stop.
var ErrStopped = errors.New("bgp speaker stopped")

// SetPeers makes the speaker's sessions exactly peers: new peers are added, peers no longer
// listed are removed (their session closes with a Cease NOTIFICATION, which withdraws this
// node's routes at that peer), and a changed peer's session is restarted. Invalid input changes
// nothing and returns every problem. Errors from GoBGP leave the failed peers to the next call.
func (s *Speaker) SetPeers(ctx context.Context, peers []Peer) error {
	if err := validatePeers(peers); err != nil {
		return fmt.Errorf("invalid peers: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	want := make(map[netip.Addr]Peer, len(peers))
	for _, p := range peers {
		want[p.Address] = p
	}
	restarting := s.restarting
	s.restarting = false
	var errs []error
	for _, addr := range slices.SortedFunc(maps.Keys(s.peers), netip.Addr.Compare) {
		if p, ok := want[addr]; ok && p.equal(s.peers[addr]) {
			continue
		}
		if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("removing peer %s: %w", addr, err))
			continue
		}
		delete(s.peers, addr)
		s.log.Info("BGP peer removed", "peer", addr)
		if _, ok := want[addr]; !ok {
			if err := s.removeExport(ctx, addr); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, addr := range slices.SortedFunc(maps.Keys(want), netip.Addr.Compare) {
		if _, ok := s.peers[addr]; ok {
			continue
		}
		if _, ok := s.exported[addr]; !ok {
			// Before the peer exists, so that its first UPDATEs carry exactly its prefixes.
			if err := s.addExport(ctx, addr, exportFor(addr, s.advs)); err != nil {
				errs = append(errs, fmt.Errorf("peer %s: %w", addr, err))
				continue
			}
		}
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(want[addr], restarting)}); err != nil {
			errs = append(errs, fmt.Errorf("adding peer %s: %w", addr, err))
			continue
		}
		s.peers[addr] = want[addr]
		s.addedRestarting[addr] = restarting
		s.log.Info("BGP peer added", "peer", addr, "asn", want[addr].ASN, "bfd", want[addr].BFD != nil,
			"gracefulRestart", want[addr].GracefulRestart)
	}
	return errors.Join(errs...)
}

// SetAdvertisements makes the announced prefixes exactly advs: prefixes no longer listed are
// withdrawn, new or changed ones announced (a change is an implicit withdraw and re-announce at
// the peers). Each prefix goes to the established peers of its family that it selects (all of
// them when its Peers is empty); a prefix whose peers changed is sent to the peers that gained
// it and withdrawn from those that lost it, without a session reset. Invalid input changes
// nothing and returns every problem.
func (s *Speaker) SetAdvertisements(ctx context.Context, advs []Advertisement) error {
	if err := validateAdvertisements(advs); err != nil {
		return fmt.Errorf("invalid advertisements: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	want := make(map[netip.Prefix]Advertisement, len(advs))
	for _, a := range advs {
		want[a.Prefix] = a
	}
	var errs []error
	for _, prefix := range slices.SortedFunc(maps.Keys(s.advs), netip.Prefix.Compare) {
		if _, ok := want[prefix]; ok {
			continue
		}
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{s.paths[prefix]}}); err != nil {
			errs = append(errs, fmt.Errorf("withdrawing %s: %w", prefix, err))
			continue
		}
		delete(s.advs, prefix)
		delete(s.paths, prefix)
		s.withdrawals.Inc()
		s.log.V(1).Info("BGP prefix withdrawn", "prefix", prefix)
	}
	// Each peer's export set before the new paths go out. A prefix announced before and after
	// whose peers changed needs the peer re-evaluated (resetOut, after the paths are in).
	var reset []netip.Addr
	announced := func(p netip.Prefix) bool { _, ok := s.advs[p]; return ok }
	for _, addr := range slices.SortedFunc(maps.Keys(s.exported), netip.Addr.Compare) {
		added, removed, err := s.updateExport(ctx, addr, exportFor(addr, want))
		if err != nil {
			errs = append(errs, err)
		}
		if slices.ContainsFunc(added, announced) || slices.ContainsFunc(removed, announced) {
			reset = append(reset, addr)
		}
	}
	for _, prefix := range slices.SortedFunc(maps.Keys(want), netip.Prefix.Compare) {
		a := want[prefix]
		if old, ok := s.advs[prefix]; ok && old.equal(a) {
			s.advs[prefix] = a // the same path, perhaps to other peers
			continue
		}
		path, err := apiPath(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// A path for a prefix already announced replaces the old one (implicit withdraw).
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}}); err != nil {
			errs = append(errs, fmt.Errorf("announcing %s: %w", prefix, err))
			continue
		}
		s.advs[prefix] = a
		s.paths[prefix] = path
		s.log.V(1).Info("BGP prefix announced", "prefix", prefix)
	}
	for _, addr := range reset {
		if _, ok := s.peers[addr]; !ok {
			continue
		}
		if err := s.resetOut(ctx, addr); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop shuts the speaker down gracefully: it withdraws every advertisement, waits until each
// established session has sent the resulting UPDATE, then closes every session with a Cease
// NOTIFICATION (subcode "peer de-configured") and stops GoBGP and its BFD endpoint. ctx bounds
// the whole shutdown; when it ends first, Stop returns its error and GoBGP finishes in the
// background. Later calls return nil at once.
func (s *Speaker) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.stopGuard()

	var errs []error
	if len(s.paths) > 0 {
		sent, err := s.sentUpdates(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{DeleteAll: true}); err != nil {
			errs = append(errs, fmt.Errorf("withdrawing all prefixes: %w", err))
		} else {
			s.withdrawals.Add(float64(len(s.paths)))
			clear(s.advs)
			clear(s.paths)
			if err := s.waitUpdatesSent(ctx, sent); err != nil {
				errs = append(errs, err)
			}
		}
	}
	done := make(chan struct{})
	go func() {
		s.srv.Stop() // Cease to every peer, then waits for the sessions to end
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("closing BGP sessions: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// StopForRestart shuts the speaker down for a restart of this process, keeping this node's
// routes at the routers: it withdraws nothing and closes the session of every peer that
// negotiated graceful restart (Peer.GracefulRestart, RFC 4724) without a NOTIFICATION, so that
// the router keeps the routes, marked stale, for the restart time while a new speaker takes
// over. Peers without graceful restart get the Cease of Stop (their router drops the routes).
// A router that runs BFD with this node may still drop them when BFD times out (see doc.go).
// ctx bounds the shutdown as in Stop.
func (s *Speaker) StopForRestart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.stopGuard()
	done := make(chan error, 1)
	go func() {
		// Not srv.Stop, which would log a failed second StopBgp: the BFD endpoint's socket is
		// left to the process's exit (StopBgp has ended every BFD session with its peer).
		done <- s.srv.StopBgp(context.WithoutCancel(ctx), &api.StopBgpRequest{AllowGracefulRestart: true})
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("closing BGP sessions for a restart: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("closing BGP sessions for a restart: %w", ctx.Err())
	}
}

// sentUpdates returns, for each established peer that has prefixes advertised to it, how many
// UPDATE messages it has sent so far.
func (s *Speaker) sentUpdates(ctx context.Context) (map[string]uint64, error) {
	sent := map[string]uint64{}
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		if p.GetState().GetSessionState() != api.PeerState_SESSION_STATE_ESTABLISHED || advertised(p) == 0 {
			return
		}
		sent[p.GetConf().GetNeighborAddress()] = p.GetState().GetMessages().GetSent().GetUpdate()
	})
	if err != nil {
		return nil, fmt.Errorf("listing peers: %w", err)
	}
	return sent, nil
}

// waitUpdatesSent waits until every peer in before has sent another UPDATE or left the
// established state.
func (s *Speaker) waitUpdatesSent(ctx context.Context, before map[string]uint64) error {
	const poll = 5 * time.Millisecond
	for len(before) > 0 {
		err := s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			addr := p.GetConf().GetNeighborAddress()
			n, ok := before[addr]
			if !ok {
				return
			}
			if p.GetState().GetSessionState() != api.PeerState_SESSION_STATE_ESTABLISHED ||
				p.GetState().GetMessages().GetSent().GetUpdate() > n {
				delete(before, addr)
			}
		})
		if err != nil {
			return fmt.Errorf("waiting for withdrawals to be sent: %w", err)
		}
		if len(before) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for withdrawals to be sent to %v: %w", slices.Sorted(maps.Keys(before)), ctx.Err())
		case <-time.After(poll):
		}
	}
	return nil
}

func advertised(p *api.Peer) uint64 {
	var n uint64
	for _, af := range p.GetAfiSafis() {
		n += af.GetState().GetAdvertised()
	}
	return n
}
