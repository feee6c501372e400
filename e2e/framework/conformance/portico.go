package conformance

import (
	"context"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/nodes"
)

// InstallPortico is the InstallProxy of the comparison. Every column gets Portico's chart
// (e2e/framework/install) with the controller's baremetal provider serving class-less
// Services from Pool, so that the LoadBalancer specs have the same LoadBalancer
// implementation everywhere. In Portico's column the agent is the service proxy and
// announces Pool by layer 2 (the router reaches it on the LAN); in a kube-proxy column
// kube-proxy is installed first (the controller reaches the apiserver through the kubernetes
// ClusterIP it programs), the chart without the agent and Pool without announcement, and the
// router reaches Pool by ECMP via every node.
func InstallPortico(logf func(string, ...any)) InstallProxy {
	return func(ctx context.Context, c *nodes.Cluster, col Column) (PoolRouting, error) {
		opts := install.Options{Pool: Pool, Classless: true, Logf: logf}
		routing := OnLink
		if col.KubeProxy != "" {
			if err := InstallKubeProxy(ctx, c.Client(), c.ControlPlane.Host(), KubeProxyRef, col.KubeProxy, len(c.Nodes)); err != nil {
				return 0, err
			}
			opts.NoAgent, opts.Announce, routing = true, []string{}, ViaEveryNode
		}
		_, err := install.Portico(ctx, c, opts)
		return routing, err
	}
}
