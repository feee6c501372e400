// Command portico-agent is the per-node dataplane: it programs Services (ClusterIP, NodePort,
// LoadBalancer IPs, externalIPs) into iptables or nftables, serves health-check node ports and,
// with --announce, announces VIPs; with --proxy-mode=none it only announces, beside kube-proxy. main only turns flags into a validated config and runs the agent;
// the announcers it can run are wired in package nodeproxy.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy"
)

const name = "portico-agent"

// gcPercent is the agent's GOGC unless the GOGC environment variable sets one: the heap may
// grow by half its live size between collections instead of the runtime's default 100%. The
// live heap is mostly the informer caches and the rendered rules, which change little between
// syncs, so the headroom is what a lower GOGC saves; it costs more collections per allocated
// byte (see docs/benchmarks.md for the measured memory and CPU).
const gcPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	cfg := config.DefaultAgent()
	cli := config.NewCLI(name)
	cfg.BindFlags(cli.Flags())
	config.ExitOnError(name, cli.Parse(os.Args[1:]))
	config.ExitOnError(name, cfg.Complete(cli.Flags()))
	config.ExitOnError(name, cfg.Validate())
	logger := klog.Background()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeproxy.Run(logr.NewContext(ctx, logger), cfg); err != nil {
		logger.Error(err, "Agent failed")
		klog.Flush()
		os.Exit(config.ExitStartup)
	}
	klog.Flush()
}
