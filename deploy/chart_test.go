package deploy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/portico-lb/portico/config"
)

// apiServer is the API server address the tests give the agent (agent.apiServer, required).
const apiServer = "https://198.18.0.10:6443"

// baseValues are the smallest valid values: the controller needs its classes, the agent the
// API server's address.
func baseValues() map[string]any {
	return map[string]any{
		"controller": map[string]any{"classes": map[string]any{"portico-lb.io/baremetal": "baremetal"}},
		"agent":      map[string]any{"apiServer": apiServer},
	}
}

// noClass are baseValues without the controller's classes.
func noClass() map[string]any { return map[string]any{"agent": map[string]any{"apiServer": apiServer}} }

// with returns base with the dotted key set to v (creating maps on the way).
func with(base map[string]any, key string, v any) map[string]any {
	m := base
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
	return base
}

// objects decodes every rendered document, by "Kind/name".
func objects(t *testing.T, out map[string]string) map[string]*unstructured.Unstructured {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	for name, m := range out {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(m), 4096)
		for {
			var o map[string]any
			if err := dec.Decode(&o); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", name, err)
			}
			if len(o) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: o}
			key := u.GetKind() + "/" + u.GetName()
			if _, dup := objs[key]; dup {
				t.Fatalf("%s rendered twice", key)
			}
			objs[key] = u
		}
	}
	return objs
}

// typed converts a rendered object to its Go type, refusing unknown fields.
func typed[T any](t *testing.T, objs map[string]*unstructured.Unstructured, key string) *T {
	t.Helper()
	u, ok := objs[key]
	if !ok {
		t.Fatalf("%s not rendered (have %v)", key, slices.Sorted(mapKeys(objs)))
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return out
}

func mustRender(t *testing.T, vals map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := render(loadChart(t), vals, renderOpts{})
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, out)
}

// TestLint runs Helm's linter on the chart with the plain manifests' values and with the
// smallest valid values: no error or warning.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"manifests": readValues(t, "manifests-values.yaml"), "minimal": baseValues()} {
		res := lint.RunAll(chartDir, vals, namespace)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s values: %s", name, m)
			}
		}
	}
}

// TestSchemaRefusesBadValues: a wrong value fails at install, naming the value.
func TestSchemaRefusesBadValues(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no class and no classless provider", map[string]any{}, "controller"},
		{"unknown provider", with(baseValues(), "controller.classes", map[string]any{"portico-lb.io/x": "gce"}), "/controller/classes/portico-lb.io~1x"},
		{"bad class", with(baseValues(), "controller.classes", map[string]any{"Not A Class!": "baremetal"}), "Not A Class!"},
		{"unknown key", with(baseValues(), "controller.replica", 3), "replica"},
		{"replicas a string", with(baseValues(), "controller.replicas", "two"), "replicas"},
		{"unknown announcer", with(baseValues(), "agent.announce", []any{"l3"}), "/agent/announce/0"},
		{"api server without scheme", with(baseValues(), "agent.apiServer", "10.0.0.1:6443"), "apiServer"},
		// Issue 31, item 7: the agent is the service proxy; the kubernetes ClusterIP leads to
		// the API server only through its own rules, which a node that boots does not have.
		{"agent without API server", with(baseValues(), "agent.apiServer", ""), "agent.apiServer is required"},
		{"agent without API server, the chart's default", map[string]any{"controller": map[string]any{"classes": map[string]any{"portico-lb.io/baremetal": "baremetal"}}}, "the control plane's address (https://HOST:PORT, e.g. --set agent.apiServer="},
		{"cluster CIDR not a CIDR", with(baseValues(), "agent.clusterCIDRs", []any{"10.0.0.0"}), "clusterCIDRs"},
		{"ccm without provider", with(baseValues(), "ccm.enabled", true), "provider"},
		{"ccm on the stock lease", with(with(with(baseValues(), "ccm.enabled", true), "ccm.provider", "aws"), "ccm.leaseName", "cloud-controller-manager"), "leaseName"},
		{"bad pull policy", with(baseValues(), "image.pullPolicy", "Sometimes"), "pullPolicy"},
		{"sample pool without spec", with(baseValues(), "addressPools", []any{map[string]any{"name": "a"}}), "spec"},
		{"extra arg not a flag", with(baseValues(), "agent.extraArgs", []any{"v=2"}), "extraArgs"},
		{"unknown proxy mode", with(baseValues(), "agent.mode", "ipvs"), "/agent/mode"},
		{"announce-only without an announcer", with(with(baseValues(), "agent.mode", "none"), "agent.announce", []any{}), "/agent/announce"},
		{"healthzPort beyond the ports", with(baseValues(), "agent.healthzPort", 70000), "healthzPort"},
		{"ignoreExcludeLB a string", with(baseValues(), "ignoreExcludeLB", "yes"), "ignoreExcludeLB"},
		{"cleanupOnUninstall a string", with(baseValues(), "agent.cleanupOnUninstall", "no"), "cleanupOnUninstall"},
		{"restartHold not a duration", with(baseValues(), "agent.membership.restartHold", "15 seconds"), "restartHold"},
		{"no grace period", with(baseValues(), "agent.terminationGracePeriodSeconds", 0), "terminationGracePeriodSeconds"},
		{"bgpGracefulRestart in minutes", with(baseValues(), "agent.bgpGracefulRestart", "2m"), "bgpGracefulRestart"},
		// Issue 31, item 6: the externalIPs policy and its allow-list.
		{"unknown externalIPs policy", with(baseValues(), "agent.externalIPs.policy", "block"), "/agent/externalIPs/policy"},
		{"externalIPs CIDR without a length", with(with(baseValues(), "agent.externalIPs.policy", "cidrs"), "agent.externalIPs.allowedCIDRs", []any{"198.18.64.1"}), "/agent/externalIPs/allowedCIDRs/0"},
		{"externalIPs CIDR out of range", with(with(baseValues(), "agent.externalIPs.policy", "cidrs"), "agent.externalIPs.allowedCIDRs", []any{"198.18.64.0/24", "198.18.300.0/24"}), "/agent/externalIPs/allowedCIDRs/1"},
		{"externalIPs cidrs without a list", with(baseValues(), "agent.externalIPs.policy", "cidrs"), "/agent/externalIPs/allowedCIDRs"},
		{"externalIPs list without cidrs", with(with(baseValues(), "agent.externalIPs.policy", "deny"), "agent.externalIPs.allowedCIDRs", []any{"198.18.64.0/24"}), "/agent/externalIPs/allowedCIDRs"},
		// Issue 31, item 4: two allocators over the same pools, or replicas that all act.
		{"two bare-metal allocators", with(with(baseValues(), "ccm.enabled", true), "ccm.provider", "baremetal"), "/controller/classes/portico-lb.io~1baremetal"},
		{"two bare-metal allocators, class-less", with(with(with(noClass(), "controller.classlessProvider", "baremetal"), "ccm.enabled", true), "ccm.provider", "baremetal"), "/controller/classlessProvider"},
		{"two controllers of class-less Services", with(with(with(baseValues(), "controller.classlessProvider", "aws"), "ccm.enabled", true), "ccm.provider", "aws"), "/controller/classlessProvider"},
		{"replicas without leader election", with(baseValues(), "controller.leaderElection.enabled", false), "/controller/replicas"},
		{"leader election off in extraArgs", with(baseValues(), "controller.extraArgs", []any{"--leader-elect=false"}), "/controller/extraArgs/0"},
		{"ccm leader election off in extraArgs", with(with(with(baseValues(), "ccm.enabled", true), "ccm.provider", "aws"), "ccm.extraArgs", []any{"--v=2", "--leader-elect=false"}), "/ccm/extraArgs/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(ch, tc.vals, renderOpts{})
			if err == nil {
				t.Fatal("rendered; want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
	if _, err := render(ch, baseValues(), renderOpts{}); err != nil {
		t.Errorf("minimal values: %v", err)
	}
	if _, err := render(ch, with(map[string]any{"controller": map[string]any{"classlessProvider": "aws"}, "aws": map[string]any{"region": "eu-west-1"}}, "agent.apiServer", apiServer), renderOpts{}); err != nil {
		t.Errorf("a classless provider alone: %v", err)
	}
	// The safe neighbours of the refused combinations still install.
	for name, vals := range map[string]map[string]any{
		"one replica without leader election":   with(with(baseValues(), "controller.leaderElection.enabled", false), "controller.replicas", 1),
		"no agent, no API server":               with(with(baseValues(), "agent.enabled", false), "agent.apiServer", ""),
		"ccm baremetal, controller aws classes": with(with(with(noClass(), "controller.classes", map[string]any{"portico-lb.io/aws": "aws"}), "ccm.enabled", true), "ccm.provider", "baremetal"),
		"ccm baremetal, controller disabled":    with(with(with(baseValues(), "controller.enabled", false), "ccm.enabled", true), "ccm.provider", "baremetal"),
		"ccm aws, controller baremetal classes": with(with(baseValues(), "ccm.enabled", true), "ccm.provider", "aws"),
		"other leader-election flags":           with(with(with(baseValues(), "ccm.enabled", true), "ccm.provider", "aws"), "ccm.extraArgs", []any{"--leader-elect-lease-duration=30s"}),
	} {
		if _, err := render(ch, vals, renderOpts{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestControllerDeployment(t *testing.T) {
	objs := mustRender(t, with(baseValues(), "aws", map[string]any{"region": "eu-west-1"}))
	d := typed[appsv1.Deployment](t, objs, "Deployment/portico-controller")
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Error("controller lacks a readiness or liveness probe")
	}
	for _, arg := range []string{"--leader-elect=true", "--leader-election-id=portico-controller", "--config=/etc/portico/config.yaml"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("no pod anti-affinity: %+v", pod.Affinity)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("controller security context %+v", sc)
	}
	if psc := pod.SecurityContext; psc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 {
		t.Errorf("controller pod security context %+v", psc)
	}
	pdb := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/portico-controller")
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "portico-controller" {
		t.Errorf("PDB %+v", pdb.Spec)
	}
	svc := typed[corev1.Service](t, objs, "Service/portico-controller-metrics")
	if svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("metrics Service %+v", svc.Spec.Ports)
	}
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-controller")
	var cfg struct {
		Classes   map[string]string         `json:"classes"`
		Providers map[string]map[string]any `json:"providers"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg, func(d *json.Decoder) *json.Decoder { return d }); err != nil {
		// clusterName is the only other key.
		if !strings.Contains(err.Error(), "clusterName") {
			t.Fatal(err)
		}
	}
	_ = yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg)
	if cfg.Classes["portico-lb.io/baremetal"] != "baremetal" {
		t.Errorf("config classes %v", cfg.Classes)
	}
	if cfg.Providers["aws"]["region"] != "eu-west-1" {
		t.Errorf("aws.region did not reach the aws provider's settings: %v", cfg.Providers)
	}

	// Required anti-affinity, no PDB.
	objs = mustRender(t, with(with(baseValues(), "controller.antiAffinity", "required"), "controller.podDisruptionBudget", map[string]any{"enabled": false}))
	d = typed[appsv1.Deployment](t, objs, "Deployment/portico-controller")
	if len(d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("antiAffinity: required rendered no required term")
	}
	if _, ok := objs["PodDisruptionBudget/portico-controller"]; ok {
		t.Error("a PDB although disabled")
	}
}

func TestAgentDaemonSet(t *testing.T) {
	objs := mustRender(t, with(baseValues(), "agent.clusterCIDRs", []any{"10.244.0.0/16", "fd00:10:244::/56"}))
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent")
	pod := ds.Spec.Template.Spec
	if pod.PriorityClassName != "system-node-critical" || !pod.HostNetwork {
		t.Errorf("priority %q hostNetwork %v", pod.PriorityClassName, pod.HostNetwork)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("tolerations %+v, want every taint tolerated", pod.Tolerations)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("agent has no capabilities set")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) {
		t.Errorf("capabilities %+v, want drop ALL, add NET_ADMIN and NET_RAW only", sc.Capabilities)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("security context %+v", sc)
	}
	cfg := agentConfig(t, objs, c.Args)
	// The API server at its own address, with the pod's service-account token and CA: no
	// ClusterIP (which the agent itself programs) on the way.
	kc, err := clientcmd.Load([]byte(typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-agent").Data["kubeconfig"]))
	if err != nil {
		t.Fatal(err)
	}
	if cl, u := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster], kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]; cl.Server != "https://198.18.0.10:6443" ||
		cl.CertificateAuthority != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" || u.TokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("the agent's kubeconfig: cluster %+v, user %+v", cl, u)
	}
	if cfg.Kubeconfig != "/etc/portico/agent/kubeconfig" || cfg.Master != "" || len(cfg.ClusterCIDRs) != 2 || !slices.Equal(cfg.Announcers, []string{"l2"}) ||
		!cfg.Membership.Enabled || cfg.Membership.Secret != "kube-system/portico-membership" || !cfg.Membership.CreateSecret || cfg.Membership.SecretFile != "" || cfg.ProxyMode != config.ProxyModeNFTables ||
		cfg.IgnoreExcludeLB || cfg.NodeName != "node1" || cfg.HealthzBindAddress != "0.0.0.0:10256" {
		t.Errorf("the agent reads from its ConfigMap and args: %+v", cfg)
	}
	// Live from the process's first moments (startup and liveness on /livez), ready after the
	// first full sync (/readyz), with the values' timings.
	for _, p := range []struct {
		name   string
		probe  *corev1.Probe
		path   string
		period int32
	}{{"startup", c.StartupProbe, "/livez", 1}, {"liveness", c.LivenessProbe, "/livez", 10}, {"readiness", c.ReadinessProbe, "/readyz", 2}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.IntValue() != 10256 || p.probe.PeriodSeconds != p.period {
			t.Errorf("%s probe %+v; want %s on 10256 every %d s", p.name, p.probe, p.path, p.period)
		}
	}
	// l2 (membership): the agent may watch the pods of its namespace (its peers), no more.
	if role := typed[rbacv1.Role](t, objs, "Role/portico-agent-pods"); len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"list", "watch"}) || role.Namespace != "kube-system" {
		t.Errorf("the agent's pods Role %+v", role)
	}
	if len(c.Command) != 0 {
		t.Errorf("without bgp the agent runs the image's entrypoint (portico-agent, no GoBGP), not %q", c.Command)
	}
	// With bgp only there is no membership and no Secret.
	objs = mustRender(t, with(with(with(baseValues(), "agent.announce", []any{"bgp"}), "agent.mode", "nftables"), "ignoreExcludeLB", true))
	ds = typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent")
	cfg = agentConfig(t, objs, ds.Spec.Template.Spec.Containers[0].Args)
	if cfg.Kubeconfig != "/etc/portico/agent/kubeconfig" || cfg.Master != "" || cfg.Membership.Enabled || !slices.Equal(cfg.Announcers, []string{"bgp"}) || cfg.ProxyMode != config.ProxyModeNFTables || !cfg.IgnoreExcludeLB {
		t.Errorf("bgp only, nftables, ignoreExcludeLB: the agent reads %+v", cfg)
	}
	if cfg.BGPGracefulRestart != 30*time.Second {
		t.Errorf("bgp: graceful restart %s; want the chart's default 30s", cfg.BGPGracefulRestart)
	}
	grOff := mustRender(t, with(with(baseValues(), "agent.announce", []any{"bgp"}), "agent.bgpGracefulRestart", "0s"))
	if cfg := agentConfig(t, grOff, typed[appsv1.DaemonSet](t, grOff, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0].Args); cfg.BGPGracefulRestart != 0 {
		t.Errorf("agent.bgpGracefulRestart 0s: the agent reads %s", cfg.BGPGracefulRestart)
	}
	if cmd := ds.Spec.Template.Spec.Containers[0].Command; !slices.Equal(cmd, []string{"/usr/local/bin/portico-agent-bgp"}) {
		t.Errorf("with bgp the agent runs %q, want the image's portico-agent-bgp", cmd)
	}
	if cm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-controller"); !strings.Contains(cm.Data["config.yaml"], "ignoreExcludeLB: true") {
		t.Errorf("ignoreExcludeLB: the controller's configuration lacks it:\n%s", cm.Data["config.yaml"])
	}
	if _, ok := objs["Secret/portico-membership"]; ok {
		t.Error("bgp only: a membership Secret")
	}
	if _, ok := objs["Role/portico-agent-pods"]; ok {
		t.Error("bgp only: the agent may read pods, which only membership needs")
	}
}

// TestAgentExternalIPs (issue 31, item 6): agent.externalIPs reaches every agent's
// configuration: allow by default (kube-proxy's behaviour), deny, or cidrs with its list.
func TestAgentExternalIPs(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want config.ExternalIPPolicy
	}{
		{"default", baseValues(), config.ExternalIPPolicy{Policy: "allow"}},
		{"deny", with(baseValues(), "agent.externalIPs.policy", "deny"), config.ExternalIPPolicy{Policy: "deny"}},
		{"cidrs", with(with(baseValues(), "agent.externalIPs.policy", "cidrs"), "agent.externalIPs.allowedCIDRs", []any{"198.18.64.0/24", "fd00:c613:64::/64"}),
			config.ExternalIPPolicy{Policy: "cidrs", AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("198.18.64.0/24"), netip.MustParsePrefix("fd00:c613:64::/64")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.vals)
			cfg := agentConfig(t, objs, typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0].Args)
			if !reflect.DeepEqual(cfg.ExternalIPs, tc.want) {
				t.Errorf("the agent reads externalIPs %+v, want %+v", cfg.ExternalIPs, tc.want)
			}
			cfg.Membership.SecretFile = "" // mounted in the pod only
			if err := cfg.Validate(); err != nil {
				t.Errorf("the agent refuses its configuration: %v", err)
			}
		})
	}
}

// TestAgentAnnounceClasses (issue 31, item 5): the agents announce the VIPs of exactly the
// Services a bare-metal provider of the release serves: the controller's classes with
// baremetal, class-less Services when the controller's classless provider or portico-ccm's is
// baremetal, nothing else.
func TestAgentAnnounceClasses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		vals      map[string]any
		classes   []string
		classless bool
	}{
		{"baremetal class", with(baseValues(), "controller.classes", map[string]any{"portico-lb.io/baremetal": "baremetal", "portico-lb.io/aws": "aws"}), []string{"portico-lb.io/baremetal"}, false},
		{"classless baremetal", with(noClass(), "controller.classlessProvider", "baremetal"), nil, true},
		{"ccm baremetal", with(with(with(noClass(), "controller.classes", map[string]any{"portico-lb.io/aws": "aws"}), "ccm.enabled", true), "ccm.provider", "baremetal"), nil, true},
		{"no baremetal", with(noClass(), "controller.classes", map[string]any{"portico-lb.io/aws": "aws"}), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.vals)
			cfg := agentConfig(t, objs, typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0].Args)
			if !slices.Equal(cfg.AnnounceClasses, tc.classes) || cfg.AnnounceClassless != tc.classless {
				t.Errorf("the agent announces classes %q, class-less %v; want %q, %v", cfg.AnnounceClasses, cfg.AnnounceClassless, tc.classes, tc.classless)
			}
		})
	}
}

// agentConfig is what portico-agent makes of the rendered ConfigMap/portico-agent (its --config
// file) and args, through the config package as the binary reads them (strict decoding, flags over the file);
// NODE_NAME is node1.
func agentConfig(t *testing.T, objs map[string]*unstructured.Unstructured, args []string) config.Agent {
	t.Helper()
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-agent")
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultAgent()
	fs := pflag.NewFlagSet("portico-agent", pflag.ContinueOnError)
	cfg.BindFlags(fs)
	var expanded []string
	for _, a := range args {
		if strings.HasPrefix(a, "--v=") {
			continue // klog's, bound by main
		}
		a = strings.ReplaceAll(a, "$(NODE_NAME)", "node1")
		expanded = append(expanded, strings.Replace(a, "/etc/portico/agent/config.yaml", file, 1))
	}
	if err := fs.Parse(expanded); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Complete(fs); err != nil {
		t.Fatalf("the agent refuses its configuration: %v\n%s", err, cm.Data["config.yaml"])
	}
	return cfg
}

// secretsProvider serves Secrets (namespaced) and Nodes from a fake dynamic client to the
// chart's lookup.
type secretsProvider struct{ client dynamic.Interface }

func (p secretsProvider) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if kind == "DaemonSet" {
		return p.client.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}), true, nil
	}
	if kind == "Node" {
		return p.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}), false, nil
	}
	return p.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

// fakeCluster is a fake dynamic client holding objs, able to list Secrets and Nodes.
func fakeCluster(objs ...runtime.Object) secretsProvider {
	return secretsProvider{dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "secrets"}:                   "SecretList",
		{Version: "v1", Resource: "nodes"}:                     "NodeList",
		{Group: "apps", Version: "v1", Resource: "daemonsets"}: "DaemonSetList",
	}, objs...)}
}

// TestUninstallCleanup: the agents clean up after themselves at uninstall, on whatever nodes
// they run then: each watches and reads its own DaemonSet (a Role for get, list and watch on
// that one object) and, with agent.cleanupOnUninstall, removes its rules; no hook Job counts
// nodes at install time. With any announcer (l2, bgp, none) the agent is told its DaemonSet,
// so that it withdraws at an uninstall.
func TestUninstallCleanup(t *testing.T) {
	ch := loadChart(t)
	for _, announce := range [][]any{{"l2"}, {"bgp"}, {}} {
		for _, clean := range []bool{true, false} {
			objs := mustRender(t, with(with(baseValues(), "agent.announce", announce), "agent.cleanupOnUninstall", clean))
			cfg := agentConfig(t, objs, typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0].Args)
			if cfg.DaemonSet != "kube-system/portico-agent" || cfg.UninstallCleanup != clean {
				t.Errorf("announce %v, cleanupOnUninstall %v: the agent reads DaemonSet %q, UninstallCleanup %v", announce, clean, cfg.DaemonSet, cfg.UninstallCleanup)
			}
			role := typed[rbacv1.Role](t, objs, "Role/portico-agent-daemonset")
			if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, []string{"apps"}) || !slices.Equal(role.Rules[0].Resources, []string{"daemonsets"}) ||
				!slices.Equal(role.Rules[0].ResourceNames, []string{"portico-agent"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
				t.Errorf("announce %v: the agent's Role %+v; want get, list and watch on its own DaemonSet only", announce, role.Rules)
			}
			rb := typed[rbacv1.RoleBinding](t, objs, "RoleBinding/portico-agent-daemonset")
			if rb.RoleRef.Name != "portico-agent-daemonset" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "portico-agent" {
				t.Errorf("announce %v: RoleBinding %+v", announce, rb)
			}
		}
	}
	// Not even with a cluster to look Nodes up in.
	out, err := render(ch, baseValues(), renderOpts{lookup: fakeCluster()})
	if err != nil {
		t.Fatal(err)
	}
	for key := range objects(t, out) {
		if strings.HasPrefix(key, "Job/") {
			t.Errorf("the chart renders %s: cleanup is the agents' own", key)
		}
	}
}

// TestMembershipSecret (issue 30, item 4): the chart never makes the gossip key. No template
// looks the cluster up or draws a random value, two renders (as `helm template`, and as an
// install against a cluster that holds the Secret) give the same manifests byte for byte, and no
// Secret is rendered: the agents read the Secret named in the values, create it when missing
// (create: true; then their Role may create Secrets) and may read, list and watch that one only.
func TestMembershipSecret(t *testing.T) {
	ch := loadChart(t)
	// The one lookup allowed decides only whether the install fails (kube-proxy's DaemonSet
	// found with a dataplane mode), never what is rendered.
	onlyRefusal := regexp.MustCompile(`\(lookup "apps/v1" "DaemonSet" "kube-system" "kube-proxy"\) \}\}\n\{\{- fail `)
	for _, f := range ch.Templates {
		data := onlyRefusal.ReplaceAll(f.Data, nil)
		for _, fn := range []string{"lookup", "randAlphaNum", "randAlpha", "randNumeric", "randAscii", "randBytes", "uuidv4", "genPrivateKey"} {
			if regexp.MustCompile(`\b` + fn + `\b`).Match(data) {
				t.Errorf("%s calls %s: a render would depend on the cluster or on chance", f.Name, fn)
			}
		}
	}
	existing := &unstructured.Unstructured{}
	existing.SetAPIVersion("v1")
	existing.SetKind("Secret")
	existing.SetNamespace(namespace)
	existing.SetName("portico-membership")
	existing.Object["data"] = map[string]any{"secret": base64.StdEncoding.EncodeToString([]byte("kept-key"))}
	first, err := render(ch, baseValues(), renderOpts{})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range []renderOpts{{}, {lookup: fakeCluster()}, {upgrade: true, lookup: fakeCluster(existing)}} {
		again, err := render(ch, baseValues(), o)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(first, again) {
			for name := range first {
				if first[name] != again[name] {
					t.Errorf("render %d: %s differs from the first render", i+2, name)
				}
			}
		}
	}
	objs := objects(t, first)
	for key := range objs {
		if strings.HasPrefix(key, "Secret/") {
			t.Errorf("the chart renders %s", key)
		}
	}
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent")
	cfg := agentConfig(t, objs, ds.Spec.Template.Spec.Containers[0].Args)
	if cfg.Membership.Secret != namespace+"/portico-membership" || !cfg.Membership.CreateSecret || cfg.Membership.SecretFile != "" {
		t.Errorf("the agent's membership keys: %+v", cfg.Membership)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			t.Errorf("the agent mounts Secret %s: it reads and watches the membership Secret instead", v.Secret.SecretName)
		}
	}
	secretRules := func(objs map[string]*unstructured.Unstructured) (read, create []rbacv1.PolicyRule) {
		for _, r := range typed[rbacv1.Role](t, objs, "Role/portico-agent-membership").Rules {
			if slices.Contains(r.Verbs, "create") {
				create = append(create, r)
			} else {
				read = append(read, r)
			}
		}
		return read, create
	}
	read, create := secretRules(objs)
	if len(read) != 1 || !slices.Equal(read[0].ResourceNames, []string{"portico-membership"}) || !slices.Equal(read[0].Verbs, []string{"get", "list", "watch"}) ||
		len(create) != 1 || !slices.Equal(create[0].Verbs, []string{"create"}) || !slices.Equal(create[0].Resources, []string{"secrets"}) {
		t.Errorf("the agent's membership Role: read %+v, create %+v", read, create)
	}

	// Bring your own Secret: the agents only read it.
	own := mustRender(t, with(with(baseValues(), "agent.membership.secret.create", false), "agent.membership.secret.name", "my-gossip"))
	if cfg := agentConfig(t, own, typed[appsv1.DaemonSet](t, own, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0].Args); cfg.Membership.Secret != namespace+"/my-gossip" || cfg.Membership.CreateSecret {
		t.Errorf("create false: the agent reads %+v", cfg.Membership)
	}
	if read, create := secretRules(own); len(create) != 0 || len(read) != 1 || !slices.Equal(read[0].ResourceNames, []string{"my-gossip"}) {
		t.Errorf("create false: the agent's membership Role: read %+v, create %+v", read, create)
	}
}

func TestCCM(t *testing.T) {
	for _, provider := range []string{"aws", "baremetal"} {
		t.Run(provider, func(t *testing.T) {
			// The controller keeps its classes on another provider: with ccm.provider baremetal
			// a second bare-metal allocator is refused (TestSchemaRefusesBadValues).
			vals := with(noClass(), "controller.classes", map[string]any{"portico-lb.io/x": "reference"})
			objs := mustRender(t, with(with(vals, "ccm.enabled", true), "ccm.provider", provider))
			d := typed[appsv1.Deployment](t, objs, "Deployment/portico-ccm")
			args := d.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--leader-elect-resource-name=portico-ccm") {
				t.Errorf("args %v: portico-ccm does not take its own Lease", args)
			}
			role := typed[rbacv1.Role](t, objs, "Role/portico-ccm")
			var leases []string
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "leases") {
					leases = append(leases, r.ResourceNames...)
				}
			}
			if !slices.Equal(leases, []string{"portico-ccm"}) {
				t.Errorf("Lease names portico-ccm may use: %v, want [portico-ccm]", leases)
			}
			cr := typed[rbacv1.ClusterRole](t, objs, "ClusterRole/portico-ccm")
			pools := false
			for _, r := range cr.Rules {
				pools = pools || slices.Contains(r.Resources, "addresspools") && slices.Contains(r.Verbs, "list")
			}
			if pools != (provider == "baremetal") {
				t.Errorf("provider %s: may list AddressPools = %v", provider, pools)
			}
			cm := typed[corev1.ConfigMap](t, objs, "ConfigMap/portico-ccm")
			if !strings.HasPrefix(cm.Data["cloud.yaml"], "provider: "+provider+"\n") {
				t.Errorf("cloud.yaml %q", cm.Data["cloud.yaml"])
			}
			typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/portico-ccm")
		})
	}
	if objs := mustRender(t, baseValues()); objs["Deployment/portico-ccm"] != nil {
		t.Error("portico-ccm rendered although not enabled")
	}
}

// TestLeastPrivilege: no component may read Secrets beyond the named BGP passwords and the
// membership keys, nor use wildcards, nor escalate RBAC; the one create of Secrets is the
// agent's, of the membership keys (a create cannot be limited by name).
func TestLeastPrivilege(t *testing.T) {
	vals := readValues(t, "manifests-values.yaml")
	objs := mustRender(t, vals)
	for key, u := range objs {
		var rules []rbacv1.PolicyRule
		switch u.GetKind() {
		case "ClusterRole":
			rules = typed[rbacv1.ClusterRole](t, objs, key).Rules
		case "Role":
			rules = typed[rbacv1.Role](t, objs, key).Rules
		default:
			continue
		}
		for _, r := range rules {
			all := append(append(append([]string{}, r.Verbs...), r.Resources...), r.APIGroups...)
			if slices.Contains(all, "*") {
				t.Errorf("%s: wildcard rule %+v", key, r)
			}
			for _, v := range []string{"escalate", "bind", "impersonate", "delete", "deletecollection"} {
				if slices.Contains(r.Verbs, v) {
					t.Errorf("%s: verb %s in %+v", key, v, r)
				}
			}
			if !slices.Contains(r.Resources, "secrets") {
				continue
			}
			createKeys := key == "Role/portico-agent-membership" && slices.Equal(r.Verbs, []string{"create"}) && slices.Equal(r.Resources, []string{"secrets"})
			if !createKeys && (len(r.ResourceNames) == 0 || !sets.New("bgp-password", "portico-membership").IsSuperset(sets.New(r.ResourceNames...))) {
				t.Errorf("%s: Secrets beyond the BGP passwords and the membership keys: %+v", key, r)
			}
		}
	}
}

// TestSamples: the sample AddressPools and BGPPeer are valid objects of the CRDs' kinds.
func TestSamples(t *testing.T) {
	objs := mustRender(t, readValues(t, "manifests-values.yaml"))
	for _, key := range []string{"AddressPool/lan", "AddressPool/routed", "BGPPeer/router"} {
		u, ok := objs[key]
		if !ok {
			t.Errorf("%s not rendered", key)
			continue
		}
		if u.GetAPIVersion() != "portico-lb.io/v1alpha1" {
			t.Errorf("%s: apiVersion %s", key, u.GetAPIVersion())
		}
	}
}

// TestChartIAMPolicyIsDeployAWS: the chart ships the one IAM policy, deploy/aws/iam-policy.json,
// byte for byte (helm reads files only inside the chart). What the policy grants, and under
// which conditions, is derived and checked in providers/aws (TestIAMPolicy); regenerating it
// there (-update-iam-policy) rewrites both.
func TestChartIAMPolicyIsDeployAWS(t *testing.T) {
	one, err := os.ReadFile(filepath.Join("aws", "iam-policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(chartDir, "files", "aws-iam-policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one, chart) {
		t.Errorf("%s differs from deploy/aws/iam-policy.json; regenerate both with: go test ./providers/aws -run TestIAMPolicy -update-iam-policy", filepath.Join(chartDir, "files", "aws-iam-policy.json"))
	}
}

// TestAgentAnnounceOnly (issue 29): agent.mode none gives the agent --proxy-mode=none with
// /healthz and /metrics off kube-proxy's ports (10266 and 127.0.0.1:10269, the probes on the
// same port) unless the values set them; the dataplane modes keep kube-proxy's. On a cluster
// that runs kube-proxy (DaemonSet kube-system/kube-proxy, as kubeadm, kind and EKS install it)
// `helm install` with a dataplane fails naming kube-proxy and agent.mode=none instead of
// leaving the agents in a crash loop; mode none, or agent.ignoreOtherProxy, installs there.
func TestAgentAnnounceOnly(t *testing.T) {
	for _, tc := range []struct {
		name             string
		vals             map[string]any
		mode             string
		healthz, metrics string
		port             int
	}{
		{"default", baseValues(), config.ProxyModeNFTables, "0.0.0.0:10256", "127.0.0.1:10249", 10256},
		{"none", with(baseValues(), "agent.mode", "none"), config.ProxyModeNone, "0.0.0.0:10266", "127.0.0.1:10269", 10266},
		{"none, ports set", with(with(with(baseValues(), "agent.mode", "none"), "agent.healthzPort", 10300), "agent.metricsBindAddress", "0"), config.ProxyModeNone, "0.0.0.0:10300", "0", 10300},
		{"iptables, port set", with(with(baseValues(), "agent.mode", "iptables"), "agent.healthzPort", 10301), config.ProxyModeIPTables, "0.0.0.0:10301", "127.0.0.1:10249", 10301},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.vals)
			c := typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0]
			cfg := agentConfig(t, objs, c.Args)
			cfg.Membership.SecretFile = "" // the pod's mounted Secret
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the agent refuses its configuration: %v", err)
			}
			if cfg.ProxyMode != tc.mode || cfg.HealthzBindAddress != tc.healthz || cfg.MetricsBindAddress != tc.metrics || cfg.IgnoreOtherProxy {
				t.Errorf("the agent runs mode %q, /healthz on %s, /metrics on %s, ignoreOtherProxy %v; want %q, %s, %s, false",
					cfg.ProxyMode, cfg.HealthzBindAddress, cfg.MetricsBindAddress, cfg.IgnoreOtherProxy, tc.mode, tc.healthz, tc.metrics)
			}
			for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntValue() != tc.port {
					t.Errorf("probe %+v; want port %d", p, tc.port)
				}
			}
			// The named port too: the API server refuses a containerPort of 0.
			if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "healthz" && int(p.ContainerPort) == tc.port }) {
				t.Errorf("container ports %+v; want healthz %d", c.Ports, tc.port)
			}
		})
	}

	ch := loadChart(t)
	kubeProxy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "kube-proxy", "namespace": "kube-system"}}}
	withKubeProxy := fakeCluster(kubeProxy)
	for _, mode := range []string{"nftables", "iptables"} {
		_, err := render(ch, with(baseValues(), "agent.mode", mode), renderOpts{lookup: withKubeProxy})
		if err == nil {
			t.Fatalf("mode %s: installed on a cluster that runs kube-proxy", mode)
		}
		for _, want := range []string{"kube-proxy runs on this cluster", "kube-system/kube-proxy", "agent.mode=none", "agent.ignoreOtherProxy"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("mode %s: error lacks %q: %v", mode, want, err)
			}
		}
	}
	if _, err := render(ch, baseValues(), renderOpts{lookup: fakeCluster()}); err != nil {
		t.Errorf("a cluster without kube-proxy: %v", err)
	}
	if _, err := render(ch, with(baseValues(), "agent.mode", "none"), renderOpts{lookup: withKubeProxy}); err != nil {
		t.Errorf("mode none beside kube-proxy: %v", err)
	}
	out, err := render(ch, with(baseValues(), "agent.ignoreOtherProxy", true), renderOpts{lookup: withKubeProxy})
	if err != nil {
		t.Fatalf("ignoreOtherProxy beside kube-proxy: %v", err)
	}
	objs := objects(t, out)
	if cfg := agentConfig(t, objs, typed[appsv1.DaemonSet](t, objs, "DaemonSet/portico-agent").Spec.Template.Spec.Containers[0].Args); !cfg.IgnoreOtherProxy {
		t.Error("agent.ignoreOtherProxy: the agent does not read it")
	}
}
