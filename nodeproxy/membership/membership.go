package membership

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/portico-lb/portico/config"
)

// DefaultPort is memberlist's usual port (TCP and UDP), as MetalLB uses it.
const DefaultPort = config.DefaultMembershipPort

// Timings are memberlist's failure-detector settings (see the package doc for the math).
type Timings struct {
	ProbeInterval           time.Duration
	ProbeTimeout            time.Duration
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	GossipInterval          time.Duration
}

// DefaultTimings are tuned for sub-second detection on one LAN: portico-agent's defaults
// (config.DefaultMembership), which own the numbers.
func DefaultTimings() Timings {
	d := config.DefaultMembership()
	return Timings{
		ProbeInterval:           d.ProbeInterval,
		ProbeTimeout:            d.ProbeTimeout,
		SuspicionMult:           d.SuspicionMult,
		SuspicionMaxTimeoutMult: d.SuspicionMaxTimeoutMult,
		GossipInterval:          d.GossipInterval,
	}
}

// Config configures a member.
type Config struct {
	// NodeName is this member's name: the Node's name.
	NodeName string
	// BindAddr is the node IP to listen on and advertise.
	BindAddr netip.Addr
	// Port is the TCP and UDP port (DefaultPort).
	Port int
	// SecretKey encrypts the gossip (the keyring's primary key: what this member sends
	// with); nil sends it in the clear. See DeriveKey and LoadSecretKey.
	SecretKey []byte
	// ExtraKeys are accepted for receiving besides SecretKey (a rotation; see SetKeys).
	// They need a SecretKey.
	ExtraKeys [][]byte
	// DecryptFailed, when set, is called for every message memberlist could not decrypt
	// (or that came unencrypted, or encrypted to a member without keys), with the peer's
	// address as memberlist logged it ("" when it did not). It must not block.
	DecryptFailed func(peer string)
	// Timings of the failure detector (DefaultTimings).
	Timings Timings
	// RejoinInterval is how often peers missing from the view are joined again.
	RejoinInterval time.Duration
	// Log receives memberlist's messages, its debug ones at V(1).
	Log logr.Logger
}

// DefaultConfig returns the defaults; NodeName and BindAddr have none.
func DefaultConfig() Config {
	return Config{Port: DefaultPort, Timings: DefaultTimings(), RejoinInterval: config.DefaultMembership().RejoinInterval}
}

// Validate returns every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("membership: node name is empty"))
	}
	if !c.BindAddr.IsValid() || c.BindAddr.IsUnspecified() {
		errs = append(errs, fmt.Errorf("membership: bind address %q is not a node IP", c.BindAddr))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("membership: port %d not in 1..65535", c.Port))
	}
	if n := len(c.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
		errs = append(errs, fmt.Errorf("membership: secret key is %d bytes, want 16, 24 or 32", n))
	}
	for i, k := range c.ExtraKeys {
		if err := memberlist.ValidateKey(k); err != nil {
			errs = append(errs, fmt.Errorf("membership: extra key %d: %w", i, err))
		}
	}
	if len(c.ExtraKeys) > 0 && len(c.SecretKey) == 0 {
		errs = append(errs, errors.New("membership: extra keys without a secret key"))
	}
	t := c.Timings
	if t.ProbeInterval <= 0 || t.ProbeTimeout <= 0 || t.ProbeTimeout >= t.ProbeInterval {
		errs = append(errs, fmt.Errorf("membership: want 0 < probe timeout (%v) < probe interval (%v)", t.ProbeTimeout, t.ProbeInterval))
	}
	if t.SuspicionMult < 1 || t.SuspicionMaxTimeoutMult < 1 || t.GossipInterval <= 0 {
		errs = append(errs, errors.New("membership: suspicion multipliers and gossip interval must be positive"))
	}
	if c.RejoinInterval <= 0 {
		errs = append(errs, fmt.Errorf("membership: rejoin interval %v is not positive", c.RejoinInterval))
	}
	return errors.Join(errs...)
}

// LoadSecretKey reads a secret from path and returns the key derived from it (DeriveKey).
func LoadSecretKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading membership secret: %w", err)
	}
	k := DeriveKey(b)
	if k == nil {
		return nil, fmt.Errorf("membership secret %s is empty", path)
	}
	return k, nil
}

// DeriveKey returns the 32-byte AES-256 key of a secret: the SHA-256 of its bytes, surrounding
// white space removed, so that any secret of any length works. An empty secret has none (nil).
func DeriveKey(secret []byte) []byte {
	b := bytes.TrimSpace(secret)
	if len(b) == 0 {
		return nil
	}
	k := sha256.Sum256(b)
	return k[:]
}

// Fingerprint names a key without revealing it: the first 8 hex digits of the SHA-256 of the
// key (of the derived key, not of the secret it came from).
func Fingerprint(key []byte) string {
	h := sha256.Sum256(key)
	return hex.EncodeToString(h[:4])
}

// Membership is a running member and its view of the alive nodes.
type Membership struct {
	cfg  Config
	list *memberlist.Memberlist
	// keyring is memberlist's (nil: unencrypted); SetKeys changes it in place.
	keyring *memberlist.Keyring

	mu    sync.Mutex
	alive map[string]bool
	// dead are the nodes that were alive and left the view, and have not come back.
	dead map[string]bool
	// holds are the nodes that said they are restarting, and until when the others keep
	// them; held are those of them that memberlist has dropped, kept in alive meanwhile.
	holds map[string]hold
	held  map[string]*time.Timer
	meta  []byte // this node's metadata (see nodeMeta)
	peers []netip.Addr
	// joining are the peers whose join runs (one goroutine each); backoff spaces the joins of
	// a peer that keeps failing (keyed by address).
	joining map[netip.Addr]bool
	backoff *flowcontrol.Backoff
	// kick asks the rejoin loop for a round at once (SetPeers).
	kick    chan struct{}
	changed chan struct{}
	// reassert receives a value when another member asked this one to announce its VIPs
	// again (AskReassert).
	reassert chan struct{}

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Start creates the member and starts the rejoin loop; the view holds only this node until
// SetPeers (or a peer's join) brings in the others. It must run in the network namespace of
// cfg.BindAddr.
func Start(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Membership{
		cfg:      cfg,
		alive:    map[string]bool{},
		dead:     map[string]bool{},
		holds:    map[string]hold{},
		held:     map[string]*time.Timer{},
		joining:  map[netip.Addr]bool{},
		backoff:  flowcontrol.NewBackOff(cfg.RejoinInterval, maxRejoinBackoff*cfg.RejoinInterval),
		kick:     make(chan struct{}, 1),
		changed:  make(chan struct{}, 1),
		reassert: make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.BindAddr = cfg.BindAddr.String()
	mc.BindPort = cfg.Port
	mc.AdvertiseAddr = cfg.BindAddr.String()
	mc.AdvertisePort = cfg.Port
	if len(cfg.SecretKey) > 0 {
		kr, err := memberlist.NewKeyring(cfg.ExtraKeys, cfg.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("membership keyring: %w", err)
		}
		mc.Keyring, m.keyring = kr, kr
	}
	mc.ProbeInterval = cfg.Timings.ProbeInterval
	mc.ProbeTimeout = cfg.Timings.ProbeTimeout
	mc.SuspicionMult = cfg.Timings.SuspicionMult
	mc.SuspicionMaxTimeoutMult = cfg.Timings.SuspicionMaxTimeoutMult
	mc.GossipInterval = cfg.Timings.GossipInterval
	mc.Events = (*events)(m)
	mc.Delegate = (*delegate)(m)
	mc.Logger = log.New(logWriter{log: cfg.Log, decryptFailed: cfg.DecryptFailed}, "", 0)
	list, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("starting membership on %s: %w", netip.AddrPortFrom(cfg.BindAddr, uint16(cfg.Port)), err)
	}
	m.list = list
	go m.rejoinLoop()
	return m, nil
}

// SetKeys replaces the keyring's keys: primary encrypts what this member sends, primary and
// extra are accepted for what it receives, any other key is dropped. Keys are added first, the
// primary switched next, the others removed last, so that no moment accepts fewer keys than
// both the old and the new set hold in common. A member started without a key (unencrypted)
// cannot start encrypting: that needs a restart (it would stop understanding its peers).
func (m *Membership) SetKeys(primary []byte, extra [][]byte) error {
	kr := m.keyring
	if kr == nil {
		return errors.New("membership runs unencrypted: restart the agent to encrypt it")
	}
	if err := memberlist.ValidateKey(primary); err != nil {
		return fmt.Errorf("primary key: %w", err)
	}
	want := append([][]byte{primary}, extra...)
	for i, k := range want {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
	}
	if err := kr.UseKey(primary); err != nil {
		return err
	}
	// memberlist v0.5.4's RemoveKey shifts the keys after the removed one within the slice
	// that decryptions in flight may be reading: such a decryption may try a key twice or
	// miss a secondary one, never the primary (index 0, never removed), which every member
	// sends with once step 2 of a rotation is done everywhere (see the package doc).
	for _, k := range slices.Clone(kr.GetKeys()) {
		if !slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, k) }) {
			if err := kr.RemoveKey(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Keys returns the keyring's keys, the primary first (nil: unencrypted).
func (m *Membership) Keys() [][]byte {
	kr := m.keyring
	if kr == nil {
		return nil
	}
	return slices.Clone(kr.GetKeys())
}

// Alive returns a copy of the view: the names of the nodes alive now, this one included, and
// the nodes held while they restart (see Held).
func (m *Membership) Alive() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.alive)
}

// IsAlive reports whether node is in the view.
func (m *Membership) IsAlive(node string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.alive[node]
}

// Dead returns a copy of the nodes that were alive in the view and left it, and have not come
// back: declared dead by the failure detector (a crash, a cut link) or left gracefully (an
// agent stopped). memberlist v0.5.4 does not tell the two apart in its leave notification
// (the Node it passes keeps its last alive state), so both count. A node never seen alive is
// not dead.
func (m *Membership) Dead() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.dead)
}

// Held returns the nodes that stopped saying they restart and are kept in the view (Alive)
// until they are back or their hold ends; memberlist itself sees them gone.
func (m *Membership) Held() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for n := range m.held {
		out[n] = true
	}
	return out
}

// Changes receives a value after the view changed; several changes may coalesce into one.
// Read the view with Alive.
func (m *Membership) Changes() <-chan struct{} { return m.changed }

// AskReassert asks node's agent to announce its VIPs again (its ReassertAsked channel fires):
// this node announced one of them while it counted node dead, and node is back. The clients
// that followed this node meanwhile keep sending to it (it serves them: every node has the
// rules) until node's announcement reaches them; and node, which never saw itself dead,
// has no other cause to announce again. Best effort: the message goes in the background,
// and a failure is logged.
func (m *Membership) AskReassert(node string) {
	var target *memberlist.Node
	for _, n := range m.list.Members() {
		if n.Name == node {
			target = n
			break
		}
	}
	if target == nil {
		return
	}
	go func() {
		if err := m.list.SendReliable(target, []byte{msgReassert}); err != nil {
			m.cfg.Log.Info("Membership: could not ask a node to announce its VIPs again", "node", node, "err", err.Error())
		}
	}()
}

// ReassertAsked receives a value after another member asked this one to announce its VIPs
// again (AskReassert); several asks may coalesce into one.
func (m *Membership) ReassertAsked() <-chan struct{} { return m.reassert }

// msgReassert is the one user message members send each other (AskReassert).
const msgReassert byte = 1

// SetPeers replaces the addresses of the other members (Node InternalIPs of the family of
// BindAddr; this node's own address is ignored) and has the rejoin loop join those not yet in
// the member list. It returns at once: joins run in the background (see rejoin).
func (m *Membership) SetPeers(peers []netip.Addr) {
	m.mu.Lock()
	m.peers = nil
	for _, p := range peers {
		if p != m.cfg.BindAddr {
			m.peers = append(m.peers, p)
		}
	}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// maxRejoinBackoff bounds the back-off of a peer whose joins keep failing, in RejoinIntervals:
// a node that is off (or has no agent) is tried every 4 intervals at most, and a healed
// partition still merges within that.
const maxRejoinBackoff = 4

// rejoin starts a join of each peer whose address no member has, unless a join of it runs or
// its back-off has not passed. Each join is memberlist's Join of that one peer in a goroutine
// of its own, so that a peer that does not answer (memberlist waits up to its TCP timeout, 10
// s, per peer) delays neither the others nor the caller. A failed join doubles the peer's
// back-off (from RejoinInterval up to maxRejoinBackoff times it); a peer seen in the member
// list resets it.
func (m *Membership) rejoin() {
	known := map[netip.Addr]bool{}
	for _, n := range m.list.Members() {
		if a, ok := netip.AddrFromSlice(n.Addr); ok {
			known[a.Unmap()] = true
		}
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.peers {
		id := p.String()
		switch {
		case known[p]:
			m.backoff.Reset(id)
		case m.joining[p] || m.backoff.IsInBackOffSinceUpdate(id, now):
		default:
			m.joining[p] = true
			go m.join(p)
		}
	}
	m.backoff.GC()
}

// join joins the member at p (after Stop it fails at once, or when its dial ends).
func (m *Membership) join(p netip.Addr) {
	addr := netip.AddrPortFrom(p, uint16(m.cfg.Port)).String()
	_, err := m.list.Join([]string{addr})
	m.mu.Lock()
	delete(m.joining, p)
	if err != nil {
		m.backoff.Next(p.String(), time.Now())
	} else {
		m.backoff.Reset(p.String())
	}
	m.mu.Unlock()
	if err != nil {
		// Unreachable peers are normal (nodes down, nodes without an agent yet).
		m.cfg.Log.V(1).Info("Joining a membership peer", "peer", addr, "err", err.Error())
	}
}

func (m *Membership) rejoinLoop() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-m.kick:
			m.rejoin()
		case <-t.C:
			m.rejoin()
		}
	}
}

// Stop leaves the cluster gracefully (waiting up to timeout for the news to spread), then shuts
// the member down. The other members drop this node at once.
func (m *Membership) Stop(timeout time.Duration) error {
	var err error
	m.stopOnce.Do(func() {
		close(m.stop)
		<-m.done
		if lerr := m.list.Leave(timeout); lerr != nil {
			err = fmt.Errorf("leaving membership: %w", lerr)
		}
		err = errors.Join(err, m.shutdown())
	})
	return err
}

// Restart tells the other members that this node's agent is restarting and will be back
// within hold (waiting up to timeout for the news to spread), then shuts the member down
// without leaving. The others keep the node in their views (Held) until it is back or hold
// has passed, so that what it announces stays where it is; after that they fail over as
// after a crash.
func (m *Membership) Restart(hold, timeout time.Duration) error {
	var err error
	m.stopOnce.Do(func() {
		close(m.stop)
		<-m.done
		m.mu.Lock()
		m.meta = encodeMeta(nodeMeta{RestartHoldMillis: hold.Milliseconds()})
		m.mu.Unlock()
		if uerr := m.list.UpdateNode(timeout); uerr != nil {
			err = fmt.Errorf("telling membership of the restart: %w", uerr)
		}
		err = errors.Join(err, m.shutdown())
	})
	return err
}

// Abort shuts the member down without leaving, as a crash would: the others notice it only by
// failed probes. It ends every goroutine of the member, except a join still waiting for an
// unreachable peer: that one ends when its dial does (memberlist's TCP timeout), failing.
func (m *Membership) Abort() error {
	var err error
	m.stopOnce.Do(func() {
		close(m.stop)
		<-m.done
		err = m.shutdown()
	})
	return err
}

func (m *Membership) shutdown() error {
	m.mu.Lock()
	for _, t := range m.held {
		t.Stop()
	}
	m.mu.Unlock()
	if err := m.list.Shutdown(); err != nil {
		return fmt.Errorf("shutting down membership: %w", err)
	}
	return nil
}

// events is the memberlist EventDelegate. memberlist calls it under its own locks: it only
// updates the view and signals without blocking.
type events Membership

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Membership)(e).joined(n) }
func (e *events) NotifyLeave(n *memberlist.Node)  { (*Membership)(e).left(n) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Membership)(e).updated(n) }

// hold is a node's announced restart: the others keep it until then.
type hold struct{ until time.Time }

// joined: n is alive (again); a hold it announces now starts counting.
func (m *Membership) joined(n *memberlist.Node) {
	m.mu.Lock()
	_, wasHeld := m.held[n.Name]
	m.unhold(n.Name)
	m.noteMeta(n)
	m.mu.Unlock()
	m.set(n.Name, true)
	if wasHeld {
		// Alive already: set did not signal, but Held changed.
		m.cfg.Log.Info("Membership: node back from its restart", "node", n.Name)
		m.signal()
	}
}

// updated: n's metadata changed; it may announce a restart.
func (m *Membership) updated(n *memberlist.Node) {
	m.mu.Lock()
	m.noteMeta(n)
	m.mu.Unlock()
}

// noteMeta records the hold n announces, or forgets it when n announces none. Callers hold
// m.mu.
func (m *Membership) noteMeta(n *memberlist.Node) {
	md := decodeMeta(n.Meta)
	if md.RestartHoldMillis <= 0 {
		delete(m.holds, n.Name)
		return
	}
	d := time.Duration(md.RestartHoldMillis) * time.Millisecond
	m.holds[n.Name] = hold{until: time.Now().Add(d)}
	m.cfg.Log.Info("Membership: node restarting; keeping it", "node", n.Name, "hold", d)
}

// left: memberlist dropped n. A node within its announced hold stays in the view until it is
// back or the hold ends; any other is dead.
func (m *Membership) left(n *memberlist.Node) {
	m.mu.Lock()
	h, ok := m.holds[n.Name]
	if ok && time.Until(h.until) > 0 && m.alive[n.Name] {
		if _, already := m.held[n.Name]; !already {
			m.held[n.Name] = time.AfterFunc(time.Until(h.until), func() { m.expire(n.Name, h) })
		}
		m.mu.Unlock()
		m.cfg.Log.Info("Membership: node gone while restarting; held", "node", n.Name, "until", h.until.Format(time.RFC3339Nano))
		m.signal()
		return
	}
	m.unhold(n.Name)
	m.mu.Unlock()
	m.set(n.Name, false)
}

// expire ends h, the hold of a node that did not come back in time: it is dead now.
func (m *Membership) expire(name string, h hold) {
	m.mu.Lock()
	if cur, ok := m.holds[name]; !ok || cur != h || m.held[name] == nil {
		m.mu.Unlock()
		return // back, or held again since
	}
	m.unhold(name)
	m.mu.Unlock()
	m.cfg.Log.Info("Membership: restart hold ended without the node back", "node", name)
	m.set(name, false)
}

// unhold forgets name's hold. Callers hold m.mu.
func (m *Membership) unhold(name string) {
	if t := m.held[name]; t != nil {
		t.Stop()
	}
	delete(m.held, name)
	delete(m.holds, name)
}

func (m *Membership) set(name string, alive bool) {
	m.mu.Lock()
	if m.alive[name] == alive {
		m.mu.Unlock()
		return
	}
	if alive {
		m.alive[name] = true
		delete(m.dead, name)
	} else {
		delete(m.alive, name)
		m.dead[name] = true
	}
	m.mu.Unlock()
	m.cfg.Log.Info("Membership view changed", "node", name, "alive", alive)
	m.signal()
}

func (m *Membership) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// nodeMeta is the metadata every member publishes (memberlist's node meta, at most 512
// bytes): JSON, so that a newer field is ignored by an older agent.
type nodeMeta struct {
	// RestartHoldMillis, when positive, says the node's agent is restarting and asks the
	// others to keep the node for that many milliseconds.
	RestartHoldMillis int64 `json:"restartHoldMs,omitempty"`
}

func encodeMeta(md nodeMeta) []byte {
	b, _ := json.Marshal(md) // a struct of an int: cannot fail
	return b
}

// decodeMeta reads b; empty or unreadable metadata is none.
func decodeMeta(b []byte) nodeMeta {
	var md nodeMeta
	if len(b) > 0 {
		_ = json.Unmarshal(b, &md)
	}
	return md
}

// heldState is what a member passes to one that joins it (memberlist's push-pull): the nodes
// it holds and the milliseconds left of each hold, so that an agent starting while another
// restarts keeps that node too instead of electing without it.
type heldState struct {
	Held map[string]int64 `json:"held,omitempty"`
}

// delegate is the memberlist Delegate: this node's metadata, and the holds passed on join.
type delegate Membership

func (d *delegate) NodeMeta(limit int) []byte {
	m := (*Membership)(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.meta) > limit {
		return nil
	}
	return bytes.Clone(m.meta)
}

// NotifyMsg takes the members' user messages: a request to announce again (AskReassert).
func (d *delegate) NotifyMsg(b []byte) {
	if len(b) == 1 && b[0] == msgReassert {
		select {
		case d.reassert <- struct{}{}:
		default:
		}
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

func (d *delegate) LocalState(join bool) []byte {
	m := (*Membership)(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	st := heldState{Held: map[string]int64{}}
	for name := range m.held {
		if left := time.Until(m.holds[name].until); left > 0 {
			st.Held[name] = left.Milliseconds()
		}
	}
	b, _ := json.Marshal(st) // a map of ints: cannot fail
	return b
}

// MergeRemoteState takes the holds of the member this one joined, once, at its join: later
// exchanges would bring back holds this member already ended.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	m := (*Membership)(d)
	if !join {
		return
	}
	var st heldState
	if err := json.Unmarshal(buf, &st); err != nil {
		return
	}
	m.mu.Lock()
	var added []string
	for name, ms := range st.Held {
		if ms <= 0 || name == m.cfg.NodeName || m.alive[name] || m.held[name] != nil {
			continue
		}
		h := hold{until: time.Now().Add(time.Duration(ms) * time.Millisecond)}
		m.holds[name] = h
		m.held[name] = time.AfterFunc(time.Until(h.until), func() { m.expire(name, h) })
		m.alive[name] = true
		delete(m.dead, name)
		added = append(added, name)
	}
	m.mu.Unlock()
	for _, name := range added {
		m.cfg.Log.Info("Membership: holding a node that is restarting, as the member joined does", "node", name)
	}
	if len(added) > 0 {
		m.signal()
	}
}

// logWriter turns memberlist's "[LEVEL] memberlist: text" lines into logr calls, and reports
// the lines that say a message could not be decrypted to decryptFailed.
type logWriter struct {
	log           logr.Logger
	decryptFailed func(peer string)
}

// decryptFailures are the texts memberlist v0.5.4 writes when a message cannot be decrypted with
// the member's keys, or is not encrypted as the member expects. memberlist reports these only
// as log lines (no error type, no metric, no delegate), so matching its text is the only hook;
// TestDecryptFailureLines pins the texts, and TestKeyRotation counts real failures of the
// vendored version.
var decryptFailures = []string{
	"no installed keys could decrypt",                            // a packet or a stream, another key
	"remote state is encrypted and encryption is not configured", // a member without keys
	"encryption is configured but remote state is not encrypted", // a peer without keys
	"Decrypt packet failed",                                      // any other packet decryption failure
}

// peerOf returns the peer memberlist names in a log line: "from=<addr>" (LogAddress, LogConn)
// or "failed to join <addr>:" (Join); "" when neither is there.
func peerOf(line string) string {
	if _, rest, ok := strings.Cut(line, "from="); ok {
		return strings.Fields(rest + " ")[0]
	}
	if _, rest, ok := strings.Cut(line, "failed to join "); ok {
		addr, _, _ := strings.Cut(rest, ": ")
		return addr
	}
	return ""
}

func (w logWriter) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	if w.decryptFailed != nil && slices.ContainsFunc(decryptFailures, func(f string) bool { return strings.Contains(line, f) }) {
		w.decryptFailed(peerOf(line))
	}
	level, msg := "", line
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if l, m, ok := strings.Cut(rest, "]"); ok {
			level, msg = l, strings.TrimSpace(m)
		}
	}
	switch level {
	case "DEBUG", "TRACE":
		w.log.V(1).Info(msg)
	default:
		w.log.Info(msg, "severity", level)
	}
	return len(b), nil
}

var (
	_ io.Writer                = logWriter{}
	_ memberlist.EventDelegate = (*events)(nil)
	_ memberlist.Delegate      = (*delegate)(nil)
)
