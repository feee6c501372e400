package ccm_test

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers/ccm"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/registry"
)

func TestNewFromConfig(t *testing.T) {
	tests := []struct {
		name     string
		config   io.Reader
		wantPool string
		wantErr  []string
	}{
		{name: "reference with a pool", config: strings.NewReader("provider: reference\nreference:\n  pool: 198.18.99.0/24\n"), wantPool: "198.18.99.0/24"},
		{name: "reference with the default pool", config: strings.NewReader("provider: reference\n"), wantPool: "198.18.128.0/24"},
		{name: "no cloud config", config: nil, wantErr: []string{"--cloud-config"}},
		{name: "empty file", config: strings.NewReader(""), wantErr: []string{"cloudConfig.provider: Required value"}},
		{name: "unknown provider", config: strings.NewReader("provider: gce\n"), wantErr: []string{`cloudConfig.provider: Unsupported value: "gce"`}},
		{name: "bad pool", config: strings.NewReader("provider: reference\nreference: {pool: 198.18.99.0}\n"), wantErr: []string{`cloudConfig.reference.pool: Invalid value: "198.18.99.0"`}},
		{name: "unknown key", config: strings.NewReader("provider: reference\npool: 198.18.99.0/24\n"), wantErr: []string{`cloudConfig.pool: Forbidden: unknown key`}},
		{name: "unknown provider key", config: strings.NewReader("provider: reference\nreference: {pol: 198.18.99.0/24}\n"), wantErr: []string{`cloudConfig.reference`, `unknown field "pol"`}},
		{name: "not YAML", config: strings.NewReader("[provider"), wantErr: []string{"parsing cloud config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cloud, err := fromConfig(t, tt.config)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Factory succeeded, want an error mentioning %q", tt.wantErr)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Factory: %v", err)
			}
			if cloud.ProviderName() != ccm.ProviderName {
				t.Errorf("ProviderName() = %q", cloud.ProviderName())
			}
			lb, _ := cloud.LoadBalancer()
			st, err := lb.EnsureLoadBalancer(ctx(t), cluster, lbService("web"), []*corev1.Node{node("n1", "10.0.0.1", nil)})
			if err != nil {
				t.Fatalf("EnsureLoadBalancer: %v", err)
			}
			if len(st.Ingress) == 0 || !netip.MustParsePrefix(tt.wantPool).Contains(netip.MustParseAddr(st.Ingress[0].IP)) {
				t.Errorf("ingress %+v, want an IP from %s", st.Ingress, tt.wantPool)
			}
		})
	}
}

func TestNewFromConfigReportsEveryProblem(t *testing.T) {
	_, err := fromConfig(t, strings.NewReader("provider: gce\nreference: {pool: nope}\nzone: x\n"))
	if err == nil {
		t.Fatal("Factory succeeded, want an error")
	}
	for _, want := range []string{"cloudConfig.provider", "cloudConfig.reference.pool", "cloudConfig.zone"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func fromConfig(t *testing.T, r io.Reader) (*ccm.Cloud, error) {
	t.Helper()
	cfg, err := config.LoadCCM(r, registry.NewConfigs())
	if err != nil {
		return nil, err
	}
	return ccm.NewFromConfig(ctx(t), cfg, providers.Env{ClusterName: "test"})
}
