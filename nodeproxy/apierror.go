package nodeproxy

import (
	"errors"
	"fmt"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// poolsUnavailable explains why the agent could not list AddressPools at startup, naming the
// cause a user can act on: the API server unreachable (the address the agent uses and the
// setting that changes it), its credentials refused, the RBAC or the CRD missing.
func poolsUnavailable(host string, err error) error {
	var urlErr *url.Error
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--announce needs AddressPools: the API server at %s has no addresspools.portico-lb.io (install deploy/crds): %w", host, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--announce needs AddressPools: the agent may not list addresspools.portico-lb.io (its ClusterRole): %w", err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s refused the agent's credentials (its ServiceAccount token or --kubeconfig): %w", host, err)
	case errors.As(err, &opErr), errors.As(err, &netErr), errors.As(err, &urlErr) && urlErr.Err != nil:
		return fmt.Errorf("cannot reach the API server at %s (set the chart's agent.apiServer, or --master/--kubeconfig, to an address this node reaches without Portico's own Service rules): %w", host, err)
	}
	return fmt.Errorf("--announce needs AddressPools (install deploy/crds, and let the agent list addresspools.portico-lb.io): %w", err)
}
