package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/wait"
)

// Defaults of Options.
const (
	DefaultNamespace = "kube-system"
	DefaultRelease   = "portico"
	DefaultClass     = "portico-lb.io/baremetal"
	DefaultPool      = "lan"
)

// Options say what to install.
type Options struct {
	// Namespace is the release's namespace; empty: kube-system.
	Namespace string
	// Release is the release name; empty: portico.
	Release string
	// Tag is the images' tag (and the version the binaries print); empty: DefaultTag. The
	// images are built (or found in the cache) and imported on every node.
	Tag string
	// NoAgent installs the controller only (agent.enabled false), e.g. beside kube-proxy.
	NoAgent bool
	// ProxyMode is the agent's dataplane: "iptables" or "nftables", or "none" (announce-only,
	// beside another service proxy); empty: the chart's default (nftables).
	ProxyMode string
	// Announce are the agent's VIP announcers and the Pool's announcement kinds: "l2", "bgp";
	// nil means ["l2"], an empty non-nil slice none.
	Announce []string
	// Pool, when valid, makes the chart create an AddressPool named PoolName (empty: lan)
	// with these addresses, announced as Announce says.
	Pool     netip.Prefix
	PoolName string
	// Class is the loadBalancerClass the controller owns with the baremetal provider; empty:
	// portico-lb.io/baremetal. Classless also gives it the Services without a class.
	Class     string
	Classless bool
	// Registry, when set (host:port[/prefix], plain HTTP), is where the images and the chart
	// come from, as in a real rollout: they are pushed there (internal/publish, what `make
	// push` runs, for this machine's architecture), the chart is pulled from
	// oci://<Registry>/charts/portico and the kubelets pull the images when they start the
	// pods (pull policy IfNotPresent); nothing is imported. The nodes' containerd must trust
	// the registry (nodes.Cluster.TrustRegistry).
	Registry string
	// Values are merged over the values this package computes (maps merge key by key, other
	// values replace), e.g. {"bgpPeers": [...]} or {"controller": {"replicas": 1}}.
	Values map[string]any
	// Timeout bounds each helm action and WaitReady; zero means 5 minutes.
	Timeout time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Release is an installed release of the chart on a nodes.Cluster.
type Release struct {
	// Name and Namespace of the release.
	Name, Namespace string
	// Images are the images of the release's current tag.
	Images Images
	// Values are the values of the release's current revision.
	Values map[string]any
	// Installed is how long Portico took: building or finding the images, importing them (or
	// pushing them and the chart, and pulling the chart, with Options.Registry), helm install
	// and WaitReady.
	Installed time.Duration
	// Pushed is the part of Installed spent building and pushing to Options.Registry.
	Pushed time.Duration

	c       *nodes.Cluster
	opts    Options
	chart   *chart.Chart
	cfg     *action.Configuration
	removed bool
	// staged are the images of other tags already imported on every node (Stage), by tag.
	staged map[string]Images
}

// ChartDir is the chart's directory in this source tree (deploy/chart/portico): found from
// this file's path, else (a -trimpath build) from the working directory, the repository root.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "chart", "portico")
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return filepath.Join("deploy", "chart", "portico")
	}
	return dir
}

// Portico installs the chart on c as a user would with `helm install` (Helm's Go packages,
// server-side apply): it builds the images (or finds them), imports them on every node and
// installs the release with Values (see there), then waits until it is ready (WaitReady).
// On an error after the install, the returned Release (if not nil) can be uninstalled.
func Portico(ctx context.Context, c *nodes.Cluster, opts Options) (*Release, error) {
	begin := time.Now()
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Release == "" {
		opts.Release = DefaultRelease
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Tag == "" {
		tag, err := DefaultTag(ctx)
		if err != nil {
			return nil, err
		}
		opts.Tag = tag
	}
	var im Images
	var ch *chart.Chart
	var pushed time.Duration
	var err error
	if opts.Registry != "" {
		var ref, version string
		if ref, version, err = push(ctx, opts, opts.Tag, ChartDir()); err != nil {
			return nil, err
		}
		pushed = time.Since(begin)
		opts.Logf("install: images %s and the chart pushed to %s after %s", opts.Tag, opts.Registry, pushed.Round(time.Millisecond))
		if ch, err = PullChart(ref, version); err != nil {
			return nil, err
		}
		im = Images{Tag: opts.Tag}
	} else {
		if im, err = BuildImages(ctx, opts.Tag, opts.Logf); err != nil {
			return nil, err
		}
		if err := Import(ctx, c, im, usedImages(opts)...); err != nil {
			return nil, err
		}
		opts.Logf("install: images %s imported on %d nodes after %s", opts.Tag, len(c.Nodes), time.Since(begin).Round(time.Millisecond))
		if ch, err = loader.Load(ChartDir()); err != nil {
			return nil, fmt.Errorf("loading the chart: %w", err)
		}
	}
	r := &Release{Name: opts.Release, Namespace: opts.Namespace, Images: im, Pushed: pushed, c: c, opts: opts, chart: ch}
	if r.cfg, err = helmConfig(c, opts.Namespace); err != nil {
		return nil, err
	}
	r.Values = Values(c, opts)
	in := action.NewInstall(r.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = opts.Release, opts.Namespace, true
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, opts.Timeout
	if _, err := in.RunWithContext(ctx, ch, r.Values); err != nil {
		return nil, fmt.Errorf("helm install: %w", err)
	}
	opts.Logf("install: helm install done after %s", time.Since(begin).Round(time.Millisecond))
	if err := r.WaitReady(ctx); err != nil {
		return r, err
	}
	r.Installed = time.Since(begin)
	opts.Logf("install: release %s ready after %s", r.Name, r.Installed.Round(time.Millisecond))
	return r, nil
}

// Values are the chart values Portico installs with on c: images Repo/<binary>:Tag with pull
// policy Never (nothing can be pulled); the controller with the baremetal provider for Class
// (and class-less Services with Classless); the agent (unless NoAgent) as the cluster's
// service proxy, reaching the API server at its real address (agent.apiServer), with the
// nodes' pod CIDRs, ProxyMode and Announce; an AddressPool of Pool; then opts.Values merged
// over them.
func Values(c *nodes.Cluster, opts Options) map[string]any {
	var podCIDRs []string
	for _, n := range c.Nodes {
		podCIDRs = append(podCIDRs, n.Lab.PodCIDR.String())
	}
	return values(c.ControlPlane.Host(), podCIDRs, opts)
}

func values(apiServer string, podCIDRs []string, opts Options) map[string]any {
	class := opts.Class
	if class == "" {
		class = DefaultClass
	}
	announce := opts.Announce
	if announce == nil {
		announce = []string{"l2"}
	}
	controller := map[string]any{"classes": map[string]any{class: "baremetal"}}
	if opts.Classless {
		controller["classlessProvider"] = "baremetal"
	}
	agent := map[string]any{
		"enabled":      !opts.NoAgent,
		"apiServer":    apiServer,
		"clusterCIDRs": toAny(podCIDRs),
		"announce":     toAny(announce),
	}
	if opts.ProxyMode != "" {
		agent["mode"] = opts.ProxyMode
	}
	image := map[string]any{"registry": Repo, "tag": opts.Tag, "pullPolicy": "Never"}
	if opts.Registry != "" {
		image = map[string]any{"registry": opts.Registry, "tag": opts.Tag, "pullPolicy": "IfNotPresent"}
	}
	vals := map[string]any{
		"image":      image,
		"controller": controller,
		"agent":      agent,
	}
	if opts.Pool.IsValid() {
		name := opts.PoolName
		if name == "" {
			name = DefaultPool
		}
		ann := map[string]any{}
		for _, a := range announce {
			ann[a] = map[string]any{}
		}
		vals["addressPools"] = []any{map[string]any{"name": name, "spec": map[string]any{
			"addresses": []any{opts.Pool.String()}, "announce": ann}}}
	}
	return Merge(vals, opts.Values)
}

// usedImages are the binaries whose images the release runs: the controller, the agent unless
// NoAgent, portico-ccm when Values enable it.
func usedImages(opts Options) []string {
	used := []string{"portico-controller"}
	if !opts.NoAgent {
		used = append(used, "portico-agent")
	}
	if ccm, _ := opts.Values["ccm"].(map[string]any); ccm["enabled"] == true {
		used = append(used, "portico-ccm")
	}
	return used
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Merge returns base with over merged into it (a copy): maps merge key by key, other values
// replace.
func Merge(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = Merge(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// helmConfig is Helm's action configuration for c's admin kubeconfig and namespace, with
// releases stored as Secrets (Helm's default driver) and Helm's log discarded.
func helmConfig(c *nodes.Cluster, namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig := c.ControlPlane.KubeconfigPath()
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	return cfg, nil
}

// Upgrade runs `helm upgrade` of the release: to tag (built or found and imported first, as
// Portico does, unless Stage did already; empty: the current tag) with values merged over the
// release's current values, then waits until the release is ready again (WaitReady: every
// agent and controller pod runs the new images).
func (r *Release) Upgrade(ctx context.Context, tag string, values map[string]any) error {
	if tag != "" && tag != r.Images.Tag {
		im, ok := r.staged[tag]
		if !ok {
			var err error
			if im, err = r.stage(ctx, tag); err != nil {
				return err
			}
		}
		r.Images = im
	}
	vals := Merge(r.Values, values)
	vals = Merge(vals, map[string]any{"image": map[string]any{"tag": r.Images.Tag}})
	up := action.NewUpgrade(r.cfg)
	up.Namespace, up.WaitStrategy, up.Timeout = r.Namespace, kube.HookOnlyStrategy, r.opts.Timeout
	up.ServerSideApply = "true"
	if _, err := up.RunWithContext(ctx, r.Name, r.chart, vals); err != nil {
		return fmt.Errorf("helm upgrade: %w", err)
	}
	r.Values = vals
	return r.WaitReady(ctx)
}

// Stage builds (or finds) the images of tag and imports them on every node, as Upgrade would,
// so that a later Upgrade to tag only runs helm: a test that watches an upgrade stages first,
// and its window holds the rollout alone, not the nodes' containerds unpacking images (a CPU
// and disk burst on every node at once, which no real rollout has: a kubelet pulls the new
// image when it starts the new pod, on its node only).
func (r *Release) Stage(ctx context.Context, tag string) error {
	if tag == "" || tag == r.Images.Tag {
		return nil
	}
	_, err := r.stage(ctx, tag)
	return err
}

func (r *Release) stage(ctx context.Context, tag string) (Images, error) {
	begin := time.Now()
	if r.opts.Registry != "" {
		// The kubelets pull the new images when they start the new pods.
		if _, _, err := push(ctx, r.opts, tag, ""); err != nil {
			return Images{}, err
		}
		if r.staged == nil {
			r.staged = map[string]Images{}
		}
		r.staged[tag] = Images{Tag: tag}
		return r.staged[tag], nil
	}
	im, err := BuildImages(ctx, tag, r.opts.Logf)
	if err != nil {
		return Images{}, err
	}
	if err := Import(ctx, r.c, im, usedImages(r.opts)...); err != nil {
		return Images{}, err
	}
	if r.staged == nil {
		r.staged = map[string]Images{}
	}
	r.staged[tag] = im
	r.opts.Logf("install: images %s imported on %d nodes from %s to %s", tag, len(r.c.Nodes),
		begin.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
	return im, nil
}

// Uninstall runs `helm uninstall --wait --cascade foreground`: Helm deletes the release's
// objects and waits until they (and so the agent's and controller's pods, each agent removing
// its rules as it stops) are gone. Calling it twice is a no-op.
func (r *Release) Uninstall(ctx context.Context) error {
	if r.removed {
		return nil
	}
	un := action.NewUninstall(r.cfg)
	un.WaitStrategy, un.Timeout, un.DeletionPropagation = kube.StatusWatcherStrategy, r.opts.Timeout, "foreground"
	if _, err := un.Run(r.Name); err != nil {
		if !onlyStillExists(err) {
			return fmt.Errorf("helm uninstall: %w", err)
		}
		// Helm 4.2's delete wait can end early: a resource whose first status has not
		// arrived yet counts as deleted, and a Deployment still Terminating is then
		// reported as "still exists" long before the timeout (seen once in six TestInstall
		// runs, after 10.6 s). Helm has deleted everything (and run any post-delete hook) and
		// purged the release by then; wait for the workloads to be gone as it meant to.
		r.opts.Logf("install: helm uninstall returned early (%v); waiting for the workloads to go", err)
		if werr := r.workloadsGone(ctx); werr != nil {
			return fmt.Errorf("helm uninstall: %w (and then: %w)", err, werr)
		}
	}
	r.removed = true
	return nil
}

// onlyStillExists reports whether err is Helm's delete wait reporting resources that still
// exist, and nothing else (no timeout, no failed hook, no failed deletion).
func onlyStillExists(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "still exists") && !strings.Contains(msg, "deadline exceeded") &&
		!strings.Contains(msg, "hook") && !strings.Contains(msg, "failed to delete")
}

// workloadsGone waits until no Deployment, DaemonSet or pod of the release is left.
func (r *Release) workloadsGone(ctx context.Context) error {
	cs := r.c.Client()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=portico"}
	return wait.Poll(ctx, 250*time.Millisecond, r.opts.Timeout, "no portico Deployment, DaemonSet or pod left", func(ctx context.Context) error {
		var left []string
		deps, err := cs.AppsV1().Deployments(r.Namespace).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, d := range deps.Items {
			left = append(left, "Deployment "+d.Name)
		}
		dss, err := cs.AppsV1().DaemonSets(r.Namespace).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, d := range dss.Items {
			left = append(left, "DaemonSet "+d.Name)
		}
		pods, err := cs.CoreV1().Pods(r.Namespace).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			left = append(left, "Pod "+p.Name)
		}
		if len(left) > 0 {
			return errors.New(strings.Join(left, ", "))
		}
		return nil
	})
}

// Labels of the chart's pods.
const (
	AgentSelector      = "app.kubernetes.io/name=portico-agent"
	ControllerSelector = "app.kubernetes.io/name=portico-controller"
)

// ref is the image reference of binary at tag the release's pods run: from Options.Registry,
// else Ref's.
func (r *Release) ref(binary, tag string) string {
	if r.opts.Registry != "" {
		return r.opts.Registry + "/" + binary + ":" + tag
	}
	return Ref(binary, tag)
}

// WaitReady waits until the release runs as its values say: with the agent, the DaemonSet has
// an up-to-date Ready pod on every node; the controller Deployment has every replica updated
// and available; every pod of both runs the images of the release's tag.
func (r *Release) WaitReady(ctx context.Context) error {
	cs := r.c.Client()
	agent := r.agentEnabled()
	want := map[string]bool{r.ref("portico-controller", r.Images.Tag): true}
	if agent {
		want[r.ref("portico-agent", r.Images.Tag)] = true
	}
	var seen string
	return wait.Poll(ctx, 250*time.Millisecond, r.opts.Timeout, "portico's agents Ready on every node and its controller available, on images "+r.Images.Tag, func(ctx context.Context) error {
		var problems []string
		if agent {
			ds, err := cs.AppsV1().DaemonSets(r.Namespace).Get(ctx, "portico-agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p := daemonSetProblem(ds, len(r.c.Nodes)); p != "" {
				problems = append(problems, p)
			}
		}
		d, err := cs.AppsV1().Deployments(r.Namespace).Get(ctx, "portico-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p := deploymentProblem(d); p != "" {
			problems = append(problems, p)
		}
		sel := ControllerSelector
		if agent {
			sel = "app.kubernetes.io/name in (portico-agent,portico-controller)"
		}
		pods, err := cs.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		var states []string
		for _, p := range pods.Items {
			states = append(states, podState(&p))
			for _, st := range p.Status.ContainerStatuses {
				if w := st.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || w.Reason == "ErrImageNeverPull") {
					return wait.Stop(fmt.Errorf("pod %s on %s: %s", p.Name, p.Spec.NodeName, podState(&p)))
				}
			}
			for _, ct := range p.Spec.Containers {
				if !want[ct.Image] {
					problems = append(problems, fmt.Sprintf("pod %s runs %s", p.Name, ct.Image))
				}
			}
		}
		seen = strings.Join(states, "; ")
		if len(problems) > 0 {
			return fmt.Errorf("%s (pods: %s)", strings.Join(problems, "; "), seen)
		}
		return nil
	})
}

func (r *Release) agentEnabled() bool {
	a, _ := r.Values["agent"].(map[string]any)
	en, ok := a["enabled"].(bool)
	return !ok || en
}

func daemonSetProblem(ds *appsv1.DaemonSet, nodes int) string {
	s := ds.Status
	switch {
	case s.ObservedGeneration < ds.Generation:
		return "agent DaemonSet not observed yet"
	case int(s.DesiredNumberScheduled) != nodes:
		return fmt.Sprintf("agent DaemonSet wants %d pods, not one per node (%d)", s.DesiredNumberScheduled, nodes)
	case s.UpdatedNumberScheduled != s.DesiredNumberScheduled || s.NumberReady != s.DesiredNumberScheduled || s.NumberAvailable != s.DesiredNumberScheduled:
		return fmt.Sprintf("agent DaemonSet %d updated, %d ready, %d available of %d", s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return ""
}

func deploymentProblem(d *appsv1.Deployment) string {
	s := d.Status
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch {
	case s.ObservedGeneration < d.Generation:
		return "controller Deployment not observed yet"
	case s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want:
		return fmt.Sprintf("controller Deployment %d updated, %d available, %d in all, want %d", s.UpdatedReplicas, s.AvailableReplicas, s.Replicas, want)
	}
	return ""
}

// podState names a pod, its node, phase, readiness and the last container trouble.
func podState(p *corev1.Pod) string {
	ready := "not ready"
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = "ready"
		}
	}
	s := fmt.Sprintf("%s on %s %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, ready)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			s += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
		}
		if cs.RestartCount > 0 {
			s += fmt.Sprintf(" restarts %d", cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil {
				s += fmt.Sprintf(" (last exit %d %s: %.200s)", t.ExitCode, t.Reason, t.Message)
			}
		}
	}
	return s
}

// Gone waits until no pod of the release is left (after Uninstall).
func (r *Release) Gone(ctx context.Context) error {
	cs := r.c.Client()
	return wait.Poll(ctx, 250*time.Millisecond, r.opts.Timeout, "no portico pod left", func(ctx context.Context) error {
		pods, err := cs.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=portico"})
		if err != nil {
			return err
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, podState(&p))
		}
		if len(names) > 0 {
			return errors.New(strings.Join(names, "; "))
		}
		return nil
	})
}

// Must is a helper for tests: it installs with Portico and registers Uninstall as cleanup.
func Must(t interface {
	Helper()
	Context() context.Context
	Cleanup(func())
	Fatalf(string, ...any)
	Errorf(string, ...any)
	Logf(string, ...any)
}, c *nodes.Cluster, opts Options) *Release {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	r, err := Portico(t.Context(), c, opts)
	if r != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := r.Uninstall(ctx); err != nil {
				t.Errorf("install: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	return r
}
