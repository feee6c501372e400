// Command pause is the sandbox ("pause") process of every pod on the clusters of real kubelets
// (e2e/framework/nodes): it holds the pod's namespaces and does nothing until SIGTERM or SIGINT,
// then exits 0. Built statically, it is the whole of the pause image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
