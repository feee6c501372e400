package main

import (
	"context"

	"github.com/portico-lb/portico/e2e/framework/conformance"
	"github.com/portico-lb/portico/e2e/framework/nodes"
)

// install puts a column's service proxy on the cluster: kube-proxy as a DaemonSet for the
// kube-proxy columns.
func install(ctx context.Context, c *nodes.Cluster, col conformance.Column) (conformance.PoolRouting, error) {
	return conformance.ViaEveryNode, conformance.InstallKubeProxy(ctx, c.Client(), c.ControlPlane.Host(), conformance.KubeProxyRef, col.KubeProxy, len(c.Nodes))
}
