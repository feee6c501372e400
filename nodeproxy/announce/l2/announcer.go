package l2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// VIP is one address this node must answer for, and the interfaces to answer on.
type VIP struct {
	Addr       netip.Addr
	Interfaces []string
}

// Options configure an Announcer.
type Options struct {
	// Log receives what the announcer does (takeovers at V(0), replies at V(2)).
	Log logr.Logger
	// Gratuitous is how many gratuitous ARP / unsolicited NA rounds follow a takeover; the
	// first goes out at once.
	Gratuitous int
	// GratuitousInterval spaces the rounds.
	GratuitousInterval time.Duration
	// Registerer takes the announcer's metrics (nil: none).
	Registerer prometheus.Registerer
}

// DefaultOptions send 4 rounds 500 ms apart: at 0, 0.5, 1 and 1.5 s after the takeover.
func DefaultOptions() Options {
	return Options{Gratuitous: 4, GratuitousInterval: 500 * time.Millisecond}
}

// Announcer answers ARP and NDP for the VIPs of the last Set on their interfaces.
type Announcer struct {
	opts Options
	// bursts counts the gratuitous bursts under way (portico_agent_l2_announcement_bursts).
	bursts prometheus.Gauge

	mu      sync.Mutex
	ifaces  map[string]*iface
	stopped bool
	wg      sync.WaitGroup // readers and gratuitous bursts
}

// New returns an Announcer that answers for nothing until Set.
func New(opts Options) *Announcer {
	if opts.Gratuitous <= 0 {
		opts.Gratuitous = 1
	}
	if opts.GratuitousInterval <= 0 {
		opts.GratuitousInterval = DefaultOptions().GratuitousInterval
	}
	a := &Announcer{opts: opts, ifaces: map[string]*iface{}, bursts: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "portico_agent_l2_announcement_bursts",
		Help: "Gratuitous ARP / unsolicited NA bursts under way (one per VIP taken over or announced again)."})}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(a.bursts)
	}
	return a
}

// Set makes vips the complete set of addresses the node answers for: it starts answering for
// new (address, interface) pairs, sending gratuitous announcements for them, and stops
// answering for pairs no longer listed. An interface that cannot be used (missing, no IPv4
// address for an IPv4 VIP, no IPv6 link-local address for an IPv6 one) is reported in the
// error and retried by the next Set; the other interfaces are served regardless. Set must run
// in the network namespace of the interfaces.
func (a *Announcer) Set(vips ...VIP) error {
	want := map[string]map[netip.Addr]bool{}
	var errs []error
	for _, v := range vips {
		if !v.Addr.IsValid() || v.Addr.Zone() != "" || v.Addr.Is4In6() {
			errs = append(errs, fmt.Errorf("invalid VIP %q", v.Addr))
			continue
		}
		for _, name := range v.Interfaces {
			if want[name] == nil {
				want[name] = map[netip.Addr]bool{}
			}
			want[name][v.Addr] = true
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return errors.New("announcer is stopped")
	}
	for name, i := range a.ifaces {
		if want[name] == nil || i.failed() {
			i.close()
			delete(a.ifaces, name)
		}
	}
	for _, name := range sortedKeys(want) {
		i := a.ifaces[name]
		if i == nil {
			var err error
			if i, err = openIface(a, name); err != nil {
				errs = append(errs, err)
				continue
			}
			a.ifaces[name] = i
		}
		if err := i.set(want[name]); err != nil {
			errs = append(errs, fmt.Errorf("interface %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Reannounce sends a new round of gratuitous announcements for every address served, e.g.
// after a healed partition, so that clients which followed the other side come back.
func (a *Announcer) Reannounce() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, i := range a.ifaces {
		i.reannounce()
	}
}

// Serving returns the addresses answered for on each interface.
func (a *Announcer) Serving() map[string][]netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]netip.Addr{}
	for name, i := range a.ifaces {
		out[name] = i.addrs()
	}
	return out
}

// Stop stops answering, closes every socket and waits for every goroutine to end. The
// clients' neighbour caches keep this node's MAC until another node announces or the entries
// expire.
func (a *Announcer) Stop() {
	a.mu.Lock()
	a.stopped = true
	for name, i := range a.ifaces {
		i.close()
		delete(a.ifaces, name)
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// go runs fn as a goroutine Stop waits for.
func (a *Announcer) goTracked(fn func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn()
	}()
}

// iface serves one interface: an ARP responder when it has IPv4 VIPs, an NDP one when it has
// IPv6 VIPs.
type iface struct {
	a   *Announcer
	log logr.Logger
	ifi *net.Interface

	mu     sync.RWMutex
	vips   map[netip.Addr]context.CancelFunc // cancels the address's gratuitous burst
	arp    *arpResponder
	ndp    *ndpResponder
	broken error // a responder's socket failed; Set reopens the interface
	closed bool
}

func openIface(a *Announcer, name string) (*iface, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("interface %s: no Ethernet address", name)
	}
	return &iface{a: a, log: a.opts.Log.WithValues("interface", name), ifi: ifi, vips: map[netip.Addr]context.CancelFunc{}}, nil
}

// set makes want the interface's addresses, opening the responders they need.
func (i *iface) set(want map[netip.Addr]bool) error {
	var errs []error
	var need4, need6 bool
	for addr := range want {
		need4 = need4 || addr.Is4()
		need6 = need6 || addr.Is6()
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if need4 && i.arp == nil {
		r, err := openARP(i)
		if err != nil {
			errs = append(errs, fmt.Errorf("opening ARP responder: %w", err))
		} else {
			i.arp = r
			i.a.goTracked(func() { i.serve(r.serve) })
		}
	}
	if need6 && i.ndp == nil {
		r, err := openNDP(i)
		if err != nil {
			errs = append(errs, fmt.Errorf("opening NDP responder: %w", err))
		} else {
			i.ndp = r
			i.a.goTracked(func() { i.serve(r.serve) })
		}
	}
	for addr, cancel := range i.vips {
		if !want[addr] {
			cancel()
			delete(i.vips, addr)
			if addr.Is6() && i.ndp != nil {
				if err := i.ndp.leave(addr); err != nil {
					errs = append(errs, err)
				}
			}
			i.log.Info("Stopped announcing", "vip", addr)
		}
	}
	for _, addr := range sortedAddrs(want) {
		if _, ok := i.vips[addr]; ok {
			continue
		}
		if (addr.Is4() && i.arp == nil) || (addr.Is6() && i.ndp == nil) {
			continue // the responder failed to open: reported above
		}
		if addr.Is6() {
			if err := i.ndp.join(addr); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		i.vips[addr] = i.burst(addr)
		i.log.Info("Announcing", "vip", addr, "mac", i.ifi.HardwareAddr.String())
	}
	return errors.Join(errs...)
}

// has reports whether the interface answers for addr.
func (i *iface) has(addr netip.Addr) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	_, ok := i.vips[addr]
	return ok
}

func (i *iface) addrs() []netip.Addr {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return sortedAddrs(i.vips)
}

func (i *iface) reannounce() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for addr, cancel := range i.vips {
		cancel()
		i.vips[addr] = i.burst(addr)
	}
}

// burst sends the gratuitous announcements for addr in a goroutine until done or cancelled.
// Callers hold i.mu.
func (i *iface) burst(addr netip.Addr) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	arpR, ndpR := i.arp, i.ndp
	n, every := i.a.opts.Gratuitous, i.a.opts.GratuitousInterval
	i.a.bursts.Inc()
	i.a.goTracked(func() {
		defer i.a.bursts.Dec()
		t := time.NewTicker(every)
		defer t.Stop()
		for k := 0; k < n; k++ {
			var err error
			if addr.Is4() {
				err = arpR.gratuitous(addr)
			} else {
				err = ndpR.unsolicited(addr)
			}
			if err != nil && ctx.Err() == nil {
				i.log.Error(err, "Sending gratuitous announcement", "vip", addr)
			}
			if k == n-1 {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return cancel
}

// serve runs a responder's read loop and marks the interface broken if it fails.
func (i *iface) serve(loop func() error) {
	err := loop()
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return
	}
	i.broken = err
	i.log.Error(err, "Responder failed; reopening on the next Set")
}

func (i *iface) failed() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.broken != nil
}

// close cancels the bursts and closes the sockets, which ends the read loops.
func (i *iface) close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	for addr, cancel := range i.vips {
		cancel()
		i.log.Info("Stopped announcing", "vip", addr)
	}
	i.vips = map[netip.Addr]context.CancelFunc{}
	if i.arp != nil {
		i.arp.close()
	}
	if i.ndp != nil {
		i.ndp.close()
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedAddrs[V any](m map[netip.Addr]V) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
