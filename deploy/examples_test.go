package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/api/v1alpha1"
)

// TestDocsExamples: the values files the README's and docs' quick starts install pass the
// chart's schema and render what the docs say: bare metal, an agent with the API server set and
// the pool (and BGPPeer) as valid objects; beside kube-proxy, an agent in mode none without a
// kubeconfig (in-cluster); AWS, the controller with its class and no agent. The
// example Service is a valid LoadBalancer Service of the bare-metal class.
func TestDocsExamples(t *testing.T) {
	dir := filepath.Join("..", "docs", "examples")
	for _, tc := range []struct {
		file   string
		agent  bool
		pools  []string
		peers  []string
		class  string
		server string
		// noDataplane: the agent announces only (mode none), reaching the API server in-cluster.
		noDataplane bool
	}{
		{file: "values-baremetal.yaml", agent: true, pools: []string{"lan"}, class: "portico-lb.io/baremetal", server: "https://CONTROL-PLANE:6443"},
		{file: "values-baremetal-bgp.yaml", agent: true, pools: []string{"routed"}, peers: []string{"router"}, class: "portico-lb.io/baremetal", server: "https://CONTROL-PLANE:6443"},
		{file: "values-announce.yaml", agent: true, pools: []string{"lan"}, class: "portico-lb.io/baremetal", noDataplane: true},
		{file: "values-aws.yaml", class: "portico-lb.io/aws"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			objs := mustRender(t, readValues(t, filepath.Join(dir, tc.file)))
			cm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-controller")
			if cfg := cm.Data["config.yaml"]; !strings.Contains(cfg, tc.class) {
				t.Errorf("controller configuration lacks the class %s:\n%s", tc.class, cfg)
			}
			if _, ok := objs["DaemonSet/portico-agent"]; ok != tc.agent {
				t.Errorf("agent DaemonSet rendered: %v, want %v", ok, tc.agent)
			}
			if tc.agent && tc.noDataplane {
				acm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-agent")
				if cfg := acm.Data["config.yaml"]; !strings.Contains(cfg, "mode: none") || strings.Contains(cfg, "kubeconfig") {
					t.Errorf("announce-only agent configuration: want mode none and no kubeconfig:\n%s", cfg)
				}
			}
			if tc.agent && !tc.noDataplane {
				acm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-agent")
				found := false
				for _, v := range acm.Data {
					found = found || strings.Contains(v, tc.server)
				}
				if !found {
					t.Errorf("agent ConfigMap lacks the API server %s: %v", tc.server, acm.Data)
				}
				typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent")
			}
			for _, p := range tc.pools {
				typed[v1alpha1.AddressPool](t, objs, "AddressPool/"+p)
			}
			for _, p := range tc.peers {
				typed[v1alpha1.BGPPeer](t, objs, "BGPPeer/"+p)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join(dir, "service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(b, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass != "portico-lb.io/baremetal" {
		t.Errorf("service.yaml: type %s, class %v", svc.Spec.Type, svc.Spec.LoadBalancerClass)
	}
}
