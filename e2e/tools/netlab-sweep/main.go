// Command netlab-sweep removes network-lab namespaces, links and processes left behind by test
// runs whose process died (for example after an interrupt). Labs of live test processes are
// left alone.
package main

import (
	"log"

	"github.com/portico-lb/portico/e2e/framework/netlab"
)

func main() {
	if err := netlab.Sweep(); err != nil {
		log.Fatalf("netlab-sweep: %v", err)
	}
}
