// Command portico-agent is the per-node dataplane: it programs Services (ClusterIP, NodePort,
// LoadBalancer IPs, externalIPs) into iptables and serves health-check node ports. main only
// turns flags into a validated config and runs the agent.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy"
)

const name = "portico-agent"

func main() {
	cfg := config.DefaultAgent()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.BindFlags(fs)
	logCfg := config.AddLogFlags(fs)
	config.ExitOnError(name, config.ParseArgs(fs, os.Args[1:]))
	config.ExitOnError(name, cfg.Validate())
	logger := textlogger.NewLogger(logCfg)
	klog.SetLogger(logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeproxy.Run(logr.NewContext(ctx, logger), cfg); err != nil {
		logger.Error(err, "Agent failed")
		os.Exit(config.ExitStartup)
	}
}
