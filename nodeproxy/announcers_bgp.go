//go:build !portico_nobgp

package nodeproxy

// The BGP announcer links GoBGP (with gRPC, protobuf and viper): about 42 MB of a 90 MB
// portico-agent, and, because the kernel maps an executable's pages in fault-around windows
// (and large folios), about 24 MB of the agent's RSS even when no announcer runs (measured at
// idle: 53 MB with it, 29 MB without). Building with -tags portico_nobgp leaves this file, and
// so GoBGP, out: --announce=bgp then fails at startup (checkAnnouncers).

import (
	"context"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
)

func init() { announcers[config.AnnouncerBGP] = newBGPAnnouncer }

var _ Consumer = (*bgp.Consumer)(nil)

func newBGPAnnouncer(ctx context.Context, d announcerDeps) (Consumer, func(), error) {
	log := d.log.WithName("bgp")
	c, err := bgp.NewConsumer(ctx, bgp.ConsumerOptions{Log: log, Node: d.cfg.NodeName, Classes: d.classes(), Dynamic: d.dyn, Secrets: d.cs,
		Recorder: d.recorder, Registerer: d.registry, Resync: d.resync, GracefulRestart: d.cfg.BGPGracefulRestart,
		Uninstalling: d.uninstalling})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		// ctx has ended by now: the shutdown gets its own deadline.
		sctx, cancel := context.WithTimeout(context.Background(), bgpStopTimeout)
		defer cancel()
		kept, err := c.Stop(sctx)
		if err != nil {
			log.Error(err, "Stopping BGP")
			return
		}
		if kept {
			log.Info("BGP stopped for a restart; the routers keep this node's routes for the graceful restart time", "restartTime", d.cfg.BGPGracefulRestart)
			return
		}
		log.Info("BGP stopped; every prefix withdrawn")
	}
	return c, stop, nil
}
