package nodeproxy

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
	"github.com/portico-lb/portico/nodeproxy/announce/l2"
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
}

// newAnnouncer builds one announcer Consumer and the function that stops it (withdrawing what
// it announces) when the agent exits.
type newAnnouncer func(ctx context.Context, d announcerDeps) (Consumer, func(), error)

// announcers are the VIP announcers --announce selects (config.KnownAnnouncers lists the same
// names): adding one is its package, one line here and its name there. Each is a Consumer of
// the sync loop, run after netfilter and the health checks, so that the rules (without the
// endpoints of dead nodes) are in place before a VIP draws traffic here.
var announcers = map[string]newAnnouncer{
	config.AnnouncerL2:  newL2Announcer,
	config.AnnouncerBGP: newBGPAnnouncer,
}

var (
	_ Consumer = (*l2.Consumer)(nil)
	_ Consumer = (*bgp.Consumer)(nil)
)

func newL2Announcer(_ context.Context, d announcerDeps) (Consumer, func(), error) {
	opts := l2.DefaultOptions()
	opts.Log = d.log.WithName("l2")
	ann := l2.New(opts)
	c := l2.NewConsumer(l2.ConsumerOptions{Log: opts.Log, Announcer: ann, Recorder: d.recorder, Registerer: d.registry})
	return c, ann.Stop, nil
}

// bgpStopTimeout bounds the graceful BGP shutdown at exit (withdraw, then close the sessions).
const bgpStopTimeout = 5 * time.Second

func newBGPAnnouncer(ctx context.Context, d announcerDeps) (Consumer, func(), error) {
	log := d.log.WithName("bgp")
	c, err := bgp.NewConsumer(ctx, bgp.ConsumerOptions{Log: log, Node: d.cfg.NodeName, Dynamic: d.dyn, Secrets: d.cs,
		Recorder: d.recorder, Registerer: d.registry, Resync: d.resync})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		// ctx has ended by now: the shutdown gets its own deadline.
		sctx, cancel := context.WithTimeout(context.Background(), bgpStopTimeout)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			log.Error(err, "Stopping BGP")
			return
		}
		log.Info("BGP stopped; every prefix withdrawn")
	}
	return c, stop, nil
}

// membershipStopTimeout bounds the graceful leave at exit.
const membershipStopTimeout = time.Second
