// Command bgpspeaker runs one nodeproxy/announce/bgp Speaker, for tests that put one in each
// node namespace of a network lab (`ip netns exec NS bgpspeaker ...`): a separate process, like
// the agent it stands in for, so every socket GoBGP opens belongs to the node's namespace.
//
// It is driven over HTTP on a Unix socket (-socket; the file system is shared across network
// namespaces): PUT /peers and PUT /advertisements take the JSON of []bgp.Peer and
// []bgp.Advertisement, GET /status returns bgp.Status, GET /metrics the Prometheus metrics.
// SIGTERM or SIGINT stops the speaker gracefully (withdraw, then Cease) within -stop-timeout
// and exits 0 after printing "stopped"; SIGUSR1 stops it for a restart (Speaker.StopForRestart:
// no withdrawal, the graceful-restart sessions close without a NOTIFICATION), as portico-agent
// stops on a node that stays. It prints "ready" once it serves.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/portico-lb/portico/nodeproxy/announce/bgp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bgpspeaker:", err)
		os.Exit(1)
	}
}

func run() error {
	socket := flag.String("socket", "", "Unix socket to serve the control API on (required)")
	routerID := flag.String("router-id", "", "BGP router ID, an IPv4 address (required)")
	listenPort := flag.Uint("listen-port", 0, "accept BGP sessions on this TCP port; 0 dials out only")
	stopTimeout := flag.Duration("stop-timeout", 10*time.Second, "bound on the graceful stop")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *socket == "" {
		return errors.New("-socket is required")
	}
	id, err := netip.ParseAddr(*routerID)
	if err != nil {
		return fmt.Errorf("-router-id: %w", err)
	}
	if *listenPort > 65535 {
		return fmt.Errorf("-listen-port %d: not a port", *listenPort)
	}

	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	sp, err := bgp.New(ctx, bgp.Options{RouterID: id, ListenPort: uint16(*listenPort), Logger: log, Registerer: reg})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("PUT /peers", func(w http.ResponseWriter, r *http.Request) {
		var peers []bgp.Peer
		if !decode(w, r, &peers) {
			return
		}
		reply(w, nil, sp.SetPeers(r.Context(), peers))
	})
	mux.HandleFunc("PUT /advertisements", func(w http.ResponseWriter, r *http.Request) {
		var advs []bgp.Advertisement
		if !decode(w, r, &advs) {
			return
		}
		reply(w, nil, sp.SetAdvertisements(r.Context(), advs))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st, err := sp.Status(r.Context())
		reply(w, st, err)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	_ = os.Remove(*socket)
	l, err := net.Listen("unix", *socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *socket, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	fmt.Println("ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	got := <-sig
	start := time.Now()
	stopCtx, cancel := context.WithTimeout(ctx, *stopTimeout)
	defer cancel()
	stop := sp.Stop
	if got == syscall.SIGUSR1 {
		stop = sp.StopForRestart
	}
	err = stop(stopCtx)
	_ = srv.Close()
	if err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	fmt.Printf("stopped in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, "decoding body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
