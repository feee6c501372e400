// Command portico-agent is the per-node dataplane: it programs Services (ClusterIP, NodePort,
// LoadBalancer IPs, externalIPs) into iptables and serves health-check node ports. main only
// turns flags into a validated config and runs the agent.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy"
)

func main() {
	cfg := config.DefaultAgent()
	fs := flag.NewFlagSet("portico-agent", flag.ExitOnError)
	cfg.BindFlags(fs)
	logCfg := textlogger.NewConfig()
	logCfg.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "portico-agent: %v\n", err)
		os.Exit(2)
	}
	logger := textlogger.NewLogger(logCfg)
	klog.SetLogger(logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeproxy.Run(logr.NewContext(ctx, logger), cfg); err != nil {
		logger.Error(err, "Agent failed")
		os.Exit(1)
	}
}
