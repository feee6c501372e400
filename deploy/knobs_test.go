package deploy

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestPodKnobs: each component's pods take the common chart knobs (annotations, labels,
// affinity, topology spread, node selector, tolerations, priority class) and its image a
// repository and a digest of its own; the chart's own labels and selectors stay.
func TestPodKnobs(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "lb", "operator": "Exists"}}}}}}}
	spread := []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "portico-controller"}}}}
	vals := with(noClass(), "controller.classes", map[string]any{"portico-lb.io/x": "reference"})
	with(vals, "ccm.enabled", true)
	with(vals, "ccm.provider", "baremetal")
	with(vals, "image.tag", "v1.2.3")
	with(vals, "image.controller", map[string]any{"repository": "mirror.example/portico/controller"})
	with(vals, "image.agent", map[string]any{"digest": digest})
	with(vals, "image.ccm", map[string]any{"repository": "mirror.example/ccm", "digest": digest})
	for _, c := range []string{"controller", "agent", "ccm"} {
		with(vals, c+".podAnnotations", map[string]any{"example.com/team": "net-" + c})
		with(vals, c+".podLabels", map[string]any{"team": "net", "app.kubernetes.io/name": "mine"})
		with(vals, c+".affinity", affinity)
		with(vals, c+".nodeSelector", map[string]any{"pool": c})
		with(vals, c+".tolerations", []any{map[string]any{"key": "dedicated", "operator": "Exists"}})
		with(vals, c+".priorityClassName", "prio-"+c)
		if c != "agent" {
			with(vals, c+".topologySpreadConstraints", spread)
		}
	}
	objs := mustRender(t, vals)
	specs := map[string]*corev1.PodTemplateSpec{
		"controller": &typed[appsv1.Deployment](t, objs, "Deployment/portico-controller").Spec.Template,
		"agent":      &typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent").Spec.Template,
		"ccm":        &typed[appsv1.Deployment](t, objs, "Deployment/portico-ccm").Spec.Template,
	}
	images := map[string]string{
		"controller": "mirror.example/portico/controller:v1.2.3",
		"agent":      "ghcr.io/portico-lb/portico-agent@" + digest,
		"ccm":        "mirror.example/ccm@" + digest,
	}
	for c, tpl := range specs {
		if got := tpl.Annotations["example.com/team"]; got != "net-"+c {
			t.Errorf("%s pod annotation example.com/team = %q", c, got)
		}
		if tpl.Annotations["portico-lb.io/config-hash"] == "" {
			t.Errorf("%s pod annotations %v lost the config hash", c, tpl.Annotations)
		}
		if tpl.Labels["team"] != "net" || tpl.Labels["app.kubernetes.io/name"] != "portico-"+c {
			t.Errorf("%s pod labels %v: want team=net added and app.kubernetes.io/name=portico-%s kept", c, tpl.Labels, c)
		}
		s := tpl.Spec
		if s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.Affinity.PodAntiAffinity != nil {
			t.Errorf("%s affinity %+v: want the values' node affinity instead of the default", c, s.Affinity)
		}
		// Helm merges maps with the defaults (the agent's kubernetes.io/os: linux stays).
		if s.NodeSelector["pool"] != c {
			t.Errorf("%s nodeSelector %v", c, s.NodeSelector)
		}
		if len(s.Tolerations) != 1 || s.Tolerations[0].Key != "dedicated" {
			t.Errorf("%s tolerations %v", c, s.Tolerations)
		}
		if s.PriorityClassName != "prio-"+c {
			t.Errorf("%s priorityClassName %q", c, s.PriorityClassName)
		}
		if c != "agent" && (len(s.TopologySpreadConstraints) != 1 || s.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone") {
			t.Errorf("%s topologySpreadConstraints %v", c, s.TopologySpreadConstraints)
		}
		if got := s.Containers[0].Image; got != images[c] {
			t.Errorf("%s image %s, want %s", c, got, images[c])
		}
	}

	// Without the knobs: the defaults as before (the controller's preferred anti-affinity, the
	// registry's images at the tag).
	objs = mustRender(t, baseValues())
	d := typed[appsv1.Deployment](t, objs, "Deployment/portico-controller")
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Errorf("controller affinity %+v: want the default anti-affinity", a)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/portico-lb/portico-controller:0.1.0" {
		t.Errorf("controller image %s", got)
	}

	for name, tc := range map[string]struct {
		vals map[string]any
		want string
	}{
		"digest not sha256":      {with(baseValues(), "image.agent.digest", "latest"), "digest"},
		"unknown image key":      {with(baseValues(), "image.agent.tag", "v1"), "tag"},
		"pod label value":        {with(baseValues(), "agent.podLabels", map[string]any{"team": "a b"}), "podLabels"},
		"pod annotation number":  {with(baseValues(), "controller.podAnnotations", map[string]any{"a": 1}), "podAnnotations"},
		"spread without maxSkew": {with(baseValues(), "controller.topologySpreadConstraints", []any{map[string]any{"topologyKey": "x"}}), "maxSkew"},
	} {
		if _, err := render(loadChart(t), tc.vals, renderOpts{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", name, err, tc.want)
		}
	}
}

// TestRecommendedLabels: every object the chart renders (all components, samples and
// monitoring on) carries Kubernetes' recommended labels.
func TestRecommendedLabels(t *testing.T) {
	vals := monitoringValues()
	with(vals, "controller.classes", map[string]any{"portico-lb.io/x": "reference"})
	with(vals, "ccm.enabled", true)
	with(vals, "ccm.provider", "baremetal")
	with(vals, "addressPools", []any{map[string]any{"name": "lan", "spec": map[string]any{"addresses": []any{"198.18.128.0/24"}}}})
	with(vals, "bgpPeers", []any{map[string]any{"name": "r", "spec": map[string]any{"peerAddress": "198.19.0.1", "peerASN": 64512, "myASN": 64513}}})
	out, err := render(loadChart(t), vals, renderOpts{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"app.kubernetes.io/instance":   "portico",
		"app.kubernetes.io/version":    "0.1.0",
		"app.kubernetes.io/part-of":    "portico",
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                "portico-0.1.0",
	}
	for key, o := range objects(t, out) {
		labels := o.GetLabels()
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", key, k, labels[k], v)
			}
		}
		if labels["app.kubernetes.io/name"] == "" {
			t.Errorf("%s: no app.kubernetes.io/name", key)
		}
	}
}
