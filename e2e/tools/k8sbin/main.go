// Command k8sbin builds (or finds in the cache) the pinned Kubernetes, etcd and CoreDNS binaries
// used by the tests and prints the directory that holds the Kubernetes ones.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
)

func main() {
	cache := flag.String("cache", k8sbin.DefaultCacheDir(), "cache directory for wrapper modules and binaries")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bins, err := k8sbin.Ensure(ctx, k8sbin.Options{CacheDir: *cache, Log: func(f string, a ...any) { log.Printf(f, a...) }})
	if err != nil {
		log.Fatalf("k8sbin: %v", err)
	}
	if _, err := k8sbin.EnsureCoreDNS(ctx, k8sbin.Options{CacheDir: *cache, Log: func(f string, a ...any) { log.Printf(f, a...) }}); err != nil {
		log.Fatalf("k8sbin: %v", err)
	}
	fmt.Println(bins.Dir())
}
