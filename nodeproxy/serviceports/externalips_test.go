package serviceports

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/nodeproxy/rules"
)

// TestExternalIPPolicy (issue 31 item 6): the agent's externalIPs policy decides which of a
// Service's spec.externalIPs get rules, per family, and RefusedExternalIPs names the others:
// allow (and the zero policy) keeps today's behaviour, deny programs none, cidrs only those
// within its list.
func TestExternalIPPolicy(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "198.18.0.10", ClusterIPs: []string{"198.18.0.10", "fd00:c613:ffff::10"},
			ExternalIPs: []string{"198.18.64.5", "198.18.65.5", "fd00:c613:64::5", "fd00:c613:65::5"},
			Ports:       []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	list := []netip.Prefix{netip.MustParsePrefix("198.18.64.0/24"), netip.MustParsePrefix("fd00:c613:64::/64")}
	for _, tc := range []struct {
		name         string
		policy       config.ExternalIPPolicy
		want4, want6 []string // programmed
		refused      []string
	}{
		{"zero value", config.ExternalIPPolicy{}, []string{"198.18.64.5", "198.18.65.5"}, []string{"fd00:c613:64::5", "fd00:c613:65::5"}, nil},
		{"allow", config.ExternalIPPolicy{Policy: config.ExternalIPsAllow}, []string{"198.18.64.5", "198.18.65.5"}, []string{"fd00:c613:64::5", "fd00:c613:65::5"}, nil},
		{"allow ignores a list", config.ExternalIPPolicy{Policy: config.ExternalIPsAllow, AllowedCIDRs: list[:1]}, []string{"198.18.64.5", "198.18.65.5"}, []string{"fd00:c613:64::5", "fd00:c613:65::5"}, nil},
		{"deny", config.ExternalIPPolicy{Policy: config.ExternalIPsDeny}, nil, nil, svc.Spec.ExternalIPs},
		{"cidrs", config.ExternalIPPolicy{Policy: config.ExternalIPsCIDRs, AllowedCIDRs: list}, []string{"198.18.64.5"}, []string{"fd00:c613:64::5"}, []string{"198.18.65.5", "fd00:c613:65::5"}},
		{"cidrs of one family", config.ExternalIPPolicy{Policy: config.ExternalIPsCIDRs, AllowedCIDRs: list[:1]}, []string{"198.18.64.5"}, nil, []string{"198.18.65.5", "fd00:c613:64::5", "fd00:c613:65::5"}},
		{"cidrs, empty list", config.ExternalIPPolicy{Policy: config.ExternalIPsCIDRs}, nil, nil, svc.Spec.ExternalIPs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := Node{Name: "node1", ExternalIPs: tc.policy}
			for fam, want := range map[rules.Family][]string{rules.IPv4: tc.want4, rules.IPv6: tc.want6} {
				ports := ServicePorts(svc, nil, node, fam)
				if len(ports) != 1 {
					t.Fatalf("%v: %d ports, want 1 (the ClusterIP is served whatever the policy)", fam, len(ports))
				}
				var got []string
				for _, a := range ports[0].ExternalIPs {
					got = append(got, a.String())
				}
				if !slices.Equal(got, want) {
					t.Errorf("%v: programmed %v, want %v", fam, got, want)
				}
			}
			if got := RefusedExternalIPs(svc, tc.policy); !slices.Equal(got, tc.refused) {
				t.Errorf("refused %v, want %v", got, tc.refused)
			}
		})
	}
}

// TestAllowsExternalIPMapped: an IPv4-mapped IPv6 address is judged as its IPv4 address.
func TestAllowsExternalIPMapped(t *testing.T) {
	p := config.ExternalIPPolicy{Policy: config.ExternalIPsCIDRs, AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.64.0/24")}}
	if !AllowsExternalIP(p, netip.MustParseAddr("::ffff:198.18.64.9")) || AllowsExternalIP(p, netip.MustParseAddr("::ffff:198.18.65.9")) {
		t.Error("IPv4-mapped addresses not judged as IPv4")
	}
}

// TestRefusedExternalIPsOnlyWhereProgrammed: ExternalName and headless Services get no rules at
// all, so nothing of theirs is reported refused.
func TestRefusedExternalIPsOnlyWhereProgrammed(t *testing.T) {
	deny := config.ExternalIPPolicy{Policy: config.ExternalIPsDeny}
	for _, spec := range []corev1.ServiceSpec{
		{Type: corev1.ServiceTypeExternalName, ExternalName: "example.invalid", ExternalIPs: []string{"198.18.64.5"}},
		{ClusterIP: corev1.ClusterIPNone, ExternalIPs: []string{"198.18.64.5"}},
	} {
		if got := RefusedExternalIPs(&corev1.Service{Spec: spec}, deny); got != nil {
			t.Errorf("%+v: refused %v, want none", spec, got)
		}
	}
}
