package config

import (
	"errors"
	"testing"
)

// TestAgentRefusesOwnClusterIP (issue 31, item 7): the agent, the node's service proxy, refuses
// the kubernetes Service's ClusterIP as its API server (the in-cluster configuration, as the
// chart's agent.apiServer "" gave it): after a reboot nothing leads there until the agent has
// synced. The API server's own address, a pod spec that overrides KUBERNETES_SERVICE_HOST, or
// no kubelet variables (outside a pod) pass.
func TestAgentRefusesOwnClusterIP(t *testing.T) {
	kubelet := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443"}
	kubelet6 := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00:c613:96::1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_PORT": "tcp://[fd00:c613:96::1]:443"}
	overridden := map[string]string{"KUBERNETES_SERVICE_HOST": "198.18.0.10", "KUBERNETES_SERVICE_PORT": "6443", "KUBERNETES_PORT": "tcp://10.96.0.1:443"}
	for _, tc := range []struct {
		name    string
		host    string
		env     map[string]string
		refused bool
	}{
		{"in-cluster configuration", "https://10.96.0.1:443", kubelet, true},
		{"in-cluster configuration, IPv6", "https://[fd00:c613:96::1]:443", kubelet6, true},
		{"the API server's own address", "https://198.18.0.10:6443", kubelet, false},
		{"the ClusterIP on another port", "https://10.96.0.1:6443", kubelet, false},
		{"KUBERNETES_SERVICE_HOST pointed at the API server", "https://198.18.0.10:6443", overridden, false},
		{"outside a pod", "https://10.96.0.1:443", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := notOwnClusterIP(tc.host, func(k string) string { return tc.env[k] })
			if got := errors.Is(err, ErrOwnClusterIP); got != tc.refused {
				t.Fatalf("%s: refused %v (%v); want %v", tc.host, got, err, tc.refused)
			}
		})
	}

	// Through Agent.RESTConfig, inside a pod given no address: refused, naming the address
	// and what to set.
	for k, v := range kubelet {
		t.Setenv(k, v)
	}
	cfg := DefaultAgent()
	cfg.Master = "https://10.96.0.1:443"
	_, err := cfg.RESTConfig()
	if !errors.Is(err, ErrOwnClusterIP) {
		t.Fatalf("RESTConfig with the ClusterIP: %v; want ErrOwnClusterIP", err)
	}
	t.Log(err)
	cfg.Master = "https://198.18.0.10:6443"
	if _, err := cfg.RESTConfig(); errors.Is(err, ErrOwnClusterIP) {
		t.Fatalf("RESTConfig with the API server's address: %v", err)
	}
	// Announce-only (--proxy-mode=none): another proxy programs the ClusterIP, which is fine.
	cfg.Master, cfg.ProxyMode = "https://10.96.0.1:443", ProxyModeNone
	if _, err := cfg.RESTConfig(); err != nil {
		t.Fatalf("RESTConfig with the ClusterIP in mode none: %v", err)
	}
}
