package aws_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-lb/portico/annotations"
)

// TestNLBBackendSSL (issue 31, item 10): a Service annotated as the Service documentation's AWS
// section gives for TLS to the backends (ssl-cert, ssl-ports 443, ssl-negotiation-policy,
// backend-protocol ssl, on an NLB) gets its address from portico-controller: a TLS listener on
// 443 with the certificate, forwarding to a TLS target group holding every node, its attributes
// without stickiness (AWS refuses stickiness on TLS target groups). Deleting it leaves nothing.
//
// On 3e563f2 the Service never got an address: every Ensure failed on
// "InvalidConfigurationRequest: You cannot enable stickiness on target groups with the TLS
// protocol" (SyncLoadBalancerFailed), with the half-made NLB left in moto.
func TestNLBBackendSSL(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := e.startController(ctlOptions{})
	const name = "tls-backend"
	cert := e.f.Certificates[0].ARN
	e.create(e.lbService(name, kindNLB, func(s *corev1.Service) {
		s.Annotations[annotations.AWSSSLCert] = cert
		s.Annotations[annotations.AWSSSLPorts] = "443"
		s.Annotations[annotations.AWSSSLNegotiationPolicy] = "ELBSecurityPolicy-TLS13-1-2-2021-06"
		s.Annotations[annotations.AWSBackendProtocol] = "ssl"
		s.Spec.Ports = []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443)}}
	}))
	e.waitLB(p, name, "TLS listener to a TLS target group", func(s *corev1.Service, lb *lbView) string {
		l, ok := lb.Listeners["TLS:443"]
		switch {
		case !ok:
			return "no TLS:443 listener"
		case l.Cert != cert:
			return fmt.Sprintf("certificate %q, want %q", l.Cert, cert)
		case l.BackendProtocol != "TLS" || l.BackendPort != s.Spec.Ports[0].NodePort:
			return fmt.Sprintf("target group %s:%d, want TLS:%d", l.BackendProtocol, l.BackendPort, s.Spec.Ports[0].NodePort)
		case len(l.Targets) != len(e.f.Nodes):
			return fmt.Sprintf("targets %v, want the %d nodes", l.Targets, len(e.f.Nodes))
		case l.TargetGroupAttrs["stickiness.type"] != "":
			return "stickiness.type set on the TLS target group"
		}
		return ""
	})
	e.delete(name)
	e.waitGone(p, name)
	e.expectNothingOwned()
}
