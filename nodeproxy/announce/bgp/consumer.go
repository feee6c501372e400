package bgp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/addresspool"
	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/nodeproxy/announce"
	"github.com/portico-lb/portico/nodeproxy/tracker"
	"github.com/portico-lb/portico/servicerules"
)

// BGPPeersResource is the BGPPeer resource the consumer watches.
var BGPPeersResource = v1alpha1.GroupVersion.WithResource("bgppeers")

// SessionInvalid is the session state reported for a BGPPeer this node cannot use (a missing
// Secret, an invalid configuration).
const SessionInvalid = "Invalid"

// reasonInvalidPeer is the Event reason on a BGPPeer this node cannot use.
const reasonInvalidPeer = "InvalidBGPPeer"

// ConsumerOptions configure a Consumer.
type ConsumerOptions struct {
	Log logr.Logger
	// Node is this node's name.
	Node string
	// Classes are the Services whose VIPs are advertised (announce.Classes).
	Classes announce.Classes
	// Dynamic watches BGPPeers and writes their status.
	Dynamic dynamic.Interface
	// Secrets watches the peers' password Secrets (each by name, see secrets.go).
	Secrets kubernetes.Interface
	// Recorder, when not nil, gets an Event on a BGPPeer this node cannot use.
	Recorder events.EventRecorder
	// Registerer, when not nil, gets the speaker's metrics.
	Registerer prometheus.Registerer
	// Resync asks the agent's loop for a sync (on a BGPPeer change).
	Resync func()
	// StatusInterval is how often session states are checked and written to BGPPeer status.
	StatusInterval time.Duration
	// NewSpeaker starts the node's speaker at the first sync with a peer; nil means New.
	NewSpeaker func(context.Context, Options) (Sessions, error)
	// GracefulRestart, when not zero, is the BGP graceful restart time (RFC 4724) offered to
	// every peer (Peer.GracefulRestart): Stop then keeps this node's routes at the routers for
	// that long (StopForRestart) unless the node is leaving (see Stop).
	GracefulRestart time.Duration
	// Uninstalling, when not nil, tells Stop whether the agent is being uninstalled (the
	// agent decides that once as it stops, nodeproxy/uninstall.go): then Stop withdraws
	// despite GracefulRestart.
	Uninstalling func() bool
}

// Sessions is what the Consumer needs of a Speaker: the full desired peers and
// advertisements, their status, and a graceful stop.
type Sessions interface {
	SetPeers(ctx context.Context, peers []Peer) error
	SetAdvertisements(ctx context.Context, advs []Advertisement) error
	Status(ctx context.Context) (Status, error)
	Stop(ctx context.Context) error
	StopForRestart(ctx context.Context) error
}

var _ Sessions = (*Speaker)(nil)

// Consumer is the agent's BGP announcer: on every sync it computes this node's peers (the
// BGPPeers whose node selector matches it) and advertisements (the VIPs of AddressPools with
// spec.announce.bgp that this node may attract, see Sync) and hands both to a Speaker, started
// on first need. It writes this node's entry of each BGPPeer's status.
type Consumer struct {
	opts   ConsumerOptions
	peers  cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}

	secrets *secretCache

	mu        sync.Mutex
	speaker   Sessions
	names     map[netip.Addr]string // peer address -> BGPPeer name
	lastPeer  map[string]Peer       // last valid configuration of each BGPPeer
	invalid   map[string]string     // BGPPeer name -> why it cannot be used
	lastPool  map[string]*addresspool.BGPSettings
	written   map[string]v1alpha1.BGPPeerNodeStatus
	eventSent map[string]string
	// staying is whether the node, at the last sync, was one that keeps its routes over an
	// agent restart: eligible (servicerules.NodeEligible) and not cordoned.
	staying bool
	// advertised are the advertisements handed to the speaker at the last sync.
	advertised []Advertisement
}

// NewConsumer starts the BGPPeer watch and the status reporter; Stop ends both and the speaker.
func NewConsumer(ctx context.Context, opts ConsumerOptions) (*Consumer, error) {
	if opts.StatusInterval == 0 {
		opts.StatusInterval = time.Second
	}
	if opts.NewSpeaker == nil {
		opts.NewSpeaker = func(ctx context.Context, o Options) (Sessions, error) { return New(ctx, o) }
	}
	ctx, cancel := context.WithCancel(ctx)
	f := dynamicinformer.NewDynamicSharedInformerFactory(opts.Dynamic, 10*time.Minute)
	inf := f.ForResource(BGPPeersResource).Informer()
	resync := func(any) {
		if opts.Resync != nil {
			opts.Resync()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: resync, DeleteFunc: resync,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*unstructured.Unstructured)
			c, ok2 := cur.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetGeneration() == c.GetGeneration() && maps.Equal(o.GetLabels(), c.GetLabels()) {
				return // a status write
			}
			resync(cur)
		}}); err != nil {
		cancel()
		return nil, fmt.Errorf("watching BGPPeers: %w", err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("waiting for BGPPeers: %w", ctx.Err())
	}
	c := &Consumer{opts: opts, peers: inf, cancel: cancel, done: make(chan struct{}), secrets: newSecretCache(ctx, opts.Secrets, opts.Resync),
		names: map[netip.Addr]string{}, lastPeer: map[string]Peer{}, invalid: map[string]string{},
		lastPool: map[string]*addresspool.BGPSettings{}, written: map[string]v1alpha1.BGPPeerNodeStatus{}, eventSent: map[string]string{}}
	go c.reportLoop(ctx)
	return c, nil
}

// Name implements the agent's Consumer.
func (c *Consumer) Name() string { return "bgp" }

// Sync implements the agent's Consumer: the full desired peers and advertisements, every time.
func (c *Consumer) Sync(ctx context.Context, st *tracker.State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Node == nil {
		return nil
	}
	c.staying = st.NodeEligible() && !st.Node.Spec.Unschedulable
	objs, all := c.selectedPeers(st.Node)
	peers := c.resolvePeers(ctx, objs)
	if c.speaker == nil {
		if len(peers) == 0 {
			return nil
		}
		id := routerID(st.Node)
		if !id.IsValid() {
			return errors.New("this node has no IPv4 address to use as BGP router ID")
		}
		sp, err := c.opts.NewSpeaker(ctx, Options{RouterID: id, Logger: c.opts.Log, Registerer: c.opts.Registerer})
		if err != nil {
			return err
		}
		c.speaker = sp
	}
	var advs []Advertisement
	if st.NodeEligible() {
		var err error
		if advs, err = c.advertisements(st, objs, all); err != nil {
			return err
		}
	}
	if st.RulesFailed {
		advs = c.keepAdvertised(advs)
	}
	c.advertised = advs
	// Withdraw first, so that a peer that goes away takes no stale route with it.
	return errors.Join(c.speaker.SetAdvertisements(ctx, advs), c.speaker.SetPeers(ctx, peers))
}

// keepAdvertised is advs less what the last sync did not advertise: the prefixes it did not
// advertise, and the peers it did not advertise a prefix to (State.RulesFailed: a sync whose
// rules failed adds no route, it may only withdraw).
func (c *Consumer) keepAdvertised(advs []Advertisement) []Advertisement {
	var out, held []Advertisement
	for _, a := range advs {
		i := slices.IndexFunc(c.advertised, func(b Advertisement) bool { return b.Prefix == a.Prefix })
		if i < 0 {
			held = append(held, a)
			continue
		}
		kept := a
		kept.Peers = slices.DeleteFunc(slices.Clone(a.Peers), func(p netip.Addr) bool { return !slices.Contains(c.advertised[i].Peers, p) })
		if len(kept.Peers) < len(a.Peers) {
			held = append(held, a)
		}
		if len(kept.Peers) > 0 {
			out = append(out, kept)
		}
	}
	if len(held) > 0 {
		var prefixes []string
		for _, a := range held {
			prefixes = append(prefixes, a.Prefix.String())
		}
		c.opts.Log.Info("Not advertising routes new to this node until its rules are programmed", "prefixes", prefixes)
	}
	return out
}

// selectedPeers returns the BGPPeers whose node selector matches node, by name, and every
// BGPPeer's labels by name.
func (c *Consumer) selectedPeers(node *corev1.Node) (map[string]*v1alpha1.BGPPeer, map[string]map[string]string) {
	objs := map[string]*v1alpha1.BGPPeer{}
	lbls := map[string]map[string]string{}
	for _, o := range c.peers.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		lbls[u.GetName()] = u.GetLabels()
		var p v1alpha1.BGPPeer
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			c.invalid[u.GetName()] = fmt.Sprintf("decoding: %v", err)
			continue
		}
		if p.Spec.NodeSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
			if err != nil {
				c.invalid[p.Name] = fmt.Sprintf("spec.nodeSelector: %v", err)
				continue
			}
			if !sel.Matches(labels.Set(node.Labels)) {
				continue
			}
		}
		objs[p.Name] = &p
	}
	return objs, lbls
}

// resolvePeers converts the BGPPeers (reading their Secrets); one that cannot be converted is
// reported and keeps its last valid configuration, if any (nothing else moves).
func (c *Consumer) resolvePeers(ctx context.Context, objs map[string]*v1alpha1.BGPPeer) []Peer {
	clear(c.names)
	for name := range c.invalid {
		if objs[name] == nil {
			delete(c.invalid, name)
		}
	}
	var out []Peer
	seen := map[netip.Addr]bool{}
	for _, name := range slices.Sorted(maps.Keys(objs)) {
		p, err := c.toPeer(ctx, objs[name])
		if err == nil && seen[p.Address] {
			err = fmt.Errorf("spec.peerAddress %s: another BGPPeer has it", p.Address)
		}
		if err != nil {
			c.invalid[name] = err.Error()
			c.event(objs[name], err.Error())
			last, ok := c.lastPeer[name]
			if !ok || seen[last.Address] {
				continue
			}
			p = last
		} else {
			delete(c.invalid, name)
			delete(c.eventSent, name)
			c.lastPeer[name] = p
		}
		seen[p.Address] = true
		c.names[p.Address] = name
		out = append(out, p)
	}
	for name := range c.lastPeer {
		if objs[name] == nil {
			delete(c.lastPeer, name)
		}
	}
	referenced := map[types.NamespacedName]bool{}
	for _, bp := range objs {
		if ref := bp.Spec.PasswordSecretRef; ref != nil {
			referenced[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = true
		}
	}
	c.secrets.retain(referenced)
	return out
}

// toPeer converts one BGPPeer; errors name the field.
func (c *Consumer) toPeer(ctx context.Context, bp *v1alpha1.BGPPeer) (Peer, error) {
	s := bp.Spec
	addr, err := netip.ParseAddr(s.PeerAddress)
	if err != nil {
		return Peer{}, fmt.Errorf("spec.peerAddress: %w", err)
	}
	if s.PeerASN < 1 || s.PeerASN > 1<<32-1 || s.MyASN < 1 || s.MyASN > 1<<32-1 {
		return Peer{}, errors.New("spec.peerASN and spec.myASN: want 1 to 4294967295")
	}
	p := Peer{Address: addr, ASN: uint32(s.PeerASN), MyASN: uint32(s.MyASN), Port: uint16(s.Port), EBGPMultihopTTL: uint8(s.EBGPMultihopTTL),
		GracefulRestart: c.opts.GracefulRestart}
	if s.HoldTime != nil {
		p.HoldTime = s.HoldTime.Duration
	}
	if s.KeepaliveTime != nil {
		p.KeepaliveTime = s.KeepaliveTime.Duration
	}
	if b := s.BFD; b != nil && (b.Enabled == nil || *b.Enabled) {
		p.BFD = &BFD{Multiplier: uint8(b.Multiplier)}
		if b.ReceiveInterval != nil {
			p.BFD.ReceiveInterval = b.ReceiveInterval.Duration
		}
		if b.TransmitInterval != nil {
			p.BFD.TransmitInterval = b.TransmitInterval.Duration
		}
	}
	if ref := s.PasswordSecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = "password"
		}
		sec, err := c.secrets.get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name})
		if err != nil {
			return Peer{}, fmt.Errorf("spec.passwordSecretRef: %w", err)
		}
		pw, ok := sec.Data[key]
		if !ok || len(pw) == 0 {
			return Peer{}, fmt.Errorf("spec.passwordSecretRef: Secret %s/%s has no key %q", ref.Namespace, ref.Name, key)
		}
		p.Password = string(pw)
	}
	if err := p.validate(); err != nil {
		return Peer{}, err
	}
	return p, nil
}

// event reports an unusable BGPPeer once per distinct problem.
func (c *Consumer) event(bp *v1alpha1.BGPPeer, msg string) {
	if c.opts.Recorder == nil || c.eventSent[bp.Name] == msg {
		return
	}
	c.eventSent[bp.Name] = msg
	ref := &corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BGPPeer", Name: bp.Name, UID: bp.UID}
	c.opts.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, reasonInvalidPeer, "Configure",
		"node %s cannot peer: %s", c.opts.Node, msg)
}

// advertisements are the prefixes this node advertises, each to the node's peers its pool
// selects (objs: this node's BGPPeers by name; all: every BGPPeer's labels by name): the VIPs
// of pools with BGP settings whose node selector matches this node and that select at least
// one of its peers of the VIP's family; with externalTrafficPolicy: Local only while this node
// has a ready endpoint.
func (c *Consumer) advertisements(st *tracker.State, objs map[string]*v1alpha1.BGPPeer, all map[string]map[string]string) ([]Advertisement, error) {
	targets, err := announce.Targets(st, c.opts.Classes)
	if err != nil {
		return nil, err
	}
	// The pools' settings, parsed once per sync rather than once per VIP.
	pools := map[string]*addresspool.BGPSettings{}
	byPrefix := map[netip.Prefix]Advertisement{}
	for _, t := range targets {
		if t.Pool == nil || t.Pool.Spec.Announce.BGP == nil {
			continue
		}
		settings, ok := pools[t.Pool.Name]
		if !ok {
			settings = c.poolSettings(t.Pool, all)
			pools[t.Pool.Name] = settings
		}
		if settings == nil {
			continue
		}
		if settings.NodeSelector != nil && !settings.NodeSelector.Matches(labels.Set(st.Node.Labels)) {
			continue
		}
		if t.LocalOnly && !t.WithEndpoints[st.NodeName] {
			continue
		}
		var peers []netip.Addr
		for addr, name := range c.names {
			if bp := objs[name]; bp != nil && addr.Is4() == t.VIP.Is4() && settings.PeerSelected(name, bp.Labels) {
				peers = append(peers, addr)
			}
		}
		if len(peers) == 0 {
			continue
		}
		bits := settings.AggregationLength
		if t.VIP.Is6() {
			bits = settings.AggregationLengthV6
		}
		prefix := netip.PrefixFrom(t.VIP, bits).Masked()
		if adv, ok := byPrefix[prefix]; ok {
			// An aggregate that covers VIPs of several pools keeps the first pool's attributes
			// and goes to the peers of all of them.
			for _, p := range peers {
				if !slices.Contains(adv.Peers, p) {
					adv.Peers = append(adv.Peers, p)
				}
			}
			slices.SortFunc(adv.Peers, netip.Addr.Compare)
			byPrefix[prefix] = adv
			continue
		}
		slices.SortFunc(peers, netip.Addr.Compare)
		adv := Advertisement{Prefix: prefix, Communities: settings.Communities, LocalPref: settings.LocalPref, Peers: peers}
		for _, lc := range settings.LargeCommunities {
			adv.LargeCommunities = append(adv.LargeCommunities, LargeCommunity{lc[0], lc[1], lc[2]})
		}
		byPrefix[prefix] = adv
	}
	for name := range c.lastPool {
		if _, ok := pools[name]; !ok {
			delete(c.lastPool, name)
		}
	}
	return slices.SortedFunc(maps.Values(byPrefix), func(a, b Advertisement) int { return a.Prefix.Compare(b.Prefix) }), nil
}

// poolSettings parses a pool's BGP settings and checks its peer selection against every
// BGPPeer (all, by name); invalid ones (reported by the controller in the pool's BGPValid
// condition, by the same rules) give way to the last valid ones, so nothing moves.
func (c *Consumer) poolSettings(ap *v1alpha1.AddressPool, all map[string]map[string]string) *addresspool.BGPSettings {
	s, errs := addresspool.ParseBGP(ap)
	if len(errs) == 0 && s != nil {
		errs = s.CheckPeers(all)
	}
	if len(errs) > 0 {
		return c.lastPool[ap.Name]
	}
	c.lastPool[ap.Name] = s
	return s
}

// routerID is the node's first IPv4 address.
func routerID(n *corev1.Node) netip.Addr {
	for _, a := range servicerules.NodeAddresses(n) {
		if a.Is4() {
			return a
		}
	}
	return netip.Addr{}
}

// Stop ends the sessions (bounded by ctx), then the watch and the status reporter. With
// ConsumerOptions.GracefulRestart on a node that stays (eligible and not cordoned at the last
// sync), the sessions close for a restart: the routers keep this node's routes for the restart
// time, so that replacing the agent's pod moves no traffic. Otherwise (graceful restart off, or
// the node drained, excluded or being deleted: it is likely going away; or the agent being
// uninstalled, see ConsumerOptions.Uninstalling) every prefix is withdrawn first. The returned bool reports whether the routes were kept.
func (c *Consumer) Stop(ctx context.Context) (bool, error) {
	c.cancel()
	<-c.done
	c.secrets.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.speaker == nil {
		return false, nil
	}
	if c.opts.GracefulRestart > 0 && c.staying && !c.uninstalling() {
		return true, c.speaker.StopForRestart(ctx)
	}
	return false, c.speaker.Stop(ctx)
}

// uninstalling runs ConsumerOptions.Uninstalling, if any.
func (c *Consumer) uninstalling() bool {
	if c.opts.Uninstalling == nil || !c.opts.Uninstalling() {
		return false
	}
	c.opts.Log.Info("The agent is being uninstalled; withdrawing the routes")
	return true
}

// reportLoop writes this node's entry of every BGPPeer's status when it changes.
func (c *Consumer) reportLoop(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(c.opts.StatusInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for name, entry := range c.nodeStatus(ctx) {
			if old, ok := c.written[name]; ok && sameEntry(old, entry) {
				continue
			}
			if old, ok := c.written[name]; ok && old.Session == entry.Session {
				entry.LastTransitionTime = old.LastTransitionTime
			}
			if err := c.writeStatus(ctx, name, entry); err != nil {
				c.opts.Log.Error(err, "Writing BGPPeer status", "peer", name)
				continue
			}
			c.written[name] = entry
		}
	}
}

func sameEntry(a, b v1alpha1.BGPPeerNodeStatus) bool {
	return a.Session == b.Session && a.BFD == b.BFD && a.AdvertisedPrefixes == b.AdvertisedPrefixes && a.Message == b.Message
}

// nodeStatus is this node's entry for every BGPPeer it uses or cannot use.
func (c *Consumer) nodeStatus(ctx context.Context) map[string]v1alpha1.BGPPeerNodeStatus {
	c.mu.Lock()
	sp := c.speaker
	names := maps.Clone(c.names)
	invalid := maps.Clone(c.invalid)
	c.mu.Unlock()
	now := metav1.Now()
	out := map[string]v1alpha1.BGPPeerNodeStatus{}
	if sp != nil {
		st, err := sp.Status(ctx)
		if err == nil {
			for _, p := range st.Peers {
				if name, ok := names[p.Address]; ok {
					out[name] = v1alpha1.BGPPeerNodeStatus{Node: c.opts.Node, Session: string(p.State), BFD: string(p.BFD),
						AdvertisedPrefixes: int32(p.Advertised), Message: p.Message, LastTransitionTime: &now}
				}
			}
		}
	}
	for name, msg := range invalid {
		e := out[name]
		e.Node, e.LastTransitionTime = c.opts.Node, &now
		if e.Session == "" {
			e.Session = SessionInvalid
		}
		e.Message = "cannot use this peer's configuration: " + msg
		out[name] = e
	}
	return out
}

// writeStatus server-side-applies this node's entry of the BGPPeer's status (a field manager
// per node, so agents never overwrite each other's entries).
func (c *Consumer) writeStatus(ctx context.Context, name string, e v1alpha1.BGPPeerNodeStatus) error {
	entry, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&e)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "BGPPeer",
		"metadata": map[string]any{"name": name},
		"status":   map[string]any{"nodes": []any{entry}},
	}}
	_, err = c.opts.Dynamic.Resource(BGPPeersResource).ApplyStatus(ctx, name, u,
		metav1.ApplyOptions{FieldManager: "portico-agent/" + c.opts.Node, Force: true})
	return err
}
