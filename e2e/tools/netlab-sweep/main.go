// Command netlab-sweep removes what test runs whose process died (for example after an
// interrupt) left behind: the containers, shims, cgroups and state directories of clusters of
// real kubelets (e2e/framework/nodes), then network-lab namespaces, links and processes. Labs
// and clusters of live test processes are left alone.
package main

import (
	"log"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/nodes"
)

func main() {
	failed := false
	if err := nodes.Sweep(); err != nil {
		log.Printf("netlab-sweep: %v", err)
		failed = true
	}
	if err := netlab.Sweep(); err != nil {
		log.Printf("netlab-sweep: %v", err)
		failed = true
	}
	if failed {
		log.Fatal("netlab-sweep: some leftovers remain")
	}
}
