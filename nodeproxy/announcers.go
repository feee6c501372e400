package nodeproxy

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/announce"
	"github.com/portico-lb/portico/nodeproxy/announce/l2"
	"github.com/portico-lb/portico/nodeproxy/membership"
)

// announcerDeps is what an announcer may use.
type announcerDeps struct {
	cfg      config.Agent
	log      logr.Logger
	recorder events.EventRecorder // nil: no Events
	registry prometheus.Registerer
	cs       kubernetes.Interface
	dyn      dynamic.Interface
	resync   func() // queues a full sync of the loop
	// uninstalling, called when the announcer stops, is true when the agent is being
	// uninstalled (uninstall.go): withdraw everything then, whatever a restart would keep.
	uninstalling func() bool
	// membership is the agents' membership (nil without --membership).
	membership *membership.Membership
}

// classes are the Services whose VIPs the announcers announce (--announce-classes,
// --announce-classless).
func (d announcerDeps) classes() announce.Classes {
	return announce.Classes{Names: d.cfg.AnnounceClasses, Classless: d.cfg.AnnounceClassless}
}

// newAnnouncer builds one announcer Consumer and the function that stops it (withdrawing what
// it announces) when the agent exits.
type newAnnouncer func(ctx context.Context, d announcerDeps) (Consumer, func(), error)

// announcers are the VIP announcers --announce selects (config.KnownAnnouncers lists the same
// names): adding one is its package, one line here and its name there. The BGP announcer's
// line is in announcers_bgp.go, which the build tag portico_nobgp leaves out (see there). Each is a Consumer of
// the sync loop, run after netfilter and the health checks, so that the rules (without the
// endpoints of dead nodes) are in place before a VIP draws traffic here.
var announcers = map[string]newAnnouncer{
	config.AnnouncerL2: newL2Announcer,
}

var _ Consumer = (*l2.Consumer)(nil)

// checkAnnouncers fails on an --announce name this binary was built without (portico_nobgp),
// at startup rather than once the caches have synced.
func checkAnnouncers(names []string) error {
	for _, name := range names {
		if announcers[name] == nil {
			return fmt.Errorf("--announce=%s: this portico-agent was built without the %s announcer (build tag portico_nobgp); run portico-agent-%s, the image's other binary, or a default build", name, name, name)
		}
	}
	return nil
}

func newL2Announcer(ctx context.Context, d announcerDeps) (Consumer, func(), error) {
	opts := l2.DefaultOptions()
	opts.Log = d.log.WithName("l2")
	opts.Registerer = d.registry
	ann := l2.New(opts)
	copts := l2.ConsumerOptions{Log: opts.Log, Announcer: ann, Classes: d.classes(), Recorder: d.recorder, Registerer: d.registry}
	if m := d.membership; m != nil {
		// A node that announced this node's VIPs while it counted it dead asks it, once it is
		// back, to announce them again (l2.ConsumerOptions.AskReassert).
		copts.AskReassert = m.AskReassert
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-m.ReassertAsked():
					opts.Log.Info("Announcing this node's VIPs again: another node announced them while it counted this one dead")
					ann.Reannounce()
				}
			}
		}()
	}
	c := l2.NewConsumer(copts)
	return c, ann.Stop, nil
}

// membershipStopTimeout bounds the graceful leave at exit.
const membershipStopTimeout = time.Second
