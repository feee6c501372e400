package nodeproxy

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestPoolsUnavailable: each cause of a failed AddressPool list at startup is named as what it
// is; an unreachable API server is not reported as a missing CRD.
func TestPoolsUnavailable(t *testing.T) {
	gr := schema.GroupResource{Group: "portico-lb.io", Resource: "addresspools"}
	refused := &url.Error{Op: "Get", URL: "https://198.18.0.1:6443/apis/portico-lb.io/v1alpha1/addresspools",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	cases := []struct {
		err        error
		want, lack string
	}{
		{apierrors.NewNotFound(gr, ""), "install deploy/crds", "cannot reach"},
		{apierrors.NewForbidden(gr, "", errors.New("no")), "may not list addresspools.portico-lb.io", "install deploy/crds"},
		{apierrors.NewUnauthorized("token"), "refused the agent's credentials", "needs AddressPools"},
		{refused, "cannot reach the API server at https://198.18.0.1:6443 (set the chart's agent.apiServer", "needs AddressPools"},
	}
	for _, c := range cases {
		got := poolsUnavailable("https://198.18.0.1:6443", c.err).Error()
		if !strings.Contains(got, c.want) || strings.Contains(got, c.lack) {
			t.Errorf("%v: %q, want it to say %q and not %q", c.err, got, c.want, c.lack)
		}
		if !errors.Is(poolsUnavailable("h", c.err), c.err) {
			t.Errorf("%v: the cause is not wrapped", c.err)
		}
	}
}
