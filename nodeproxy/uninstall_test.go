package nodeproxy

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/portico-lb/portico/config"
)

// TestDaemonSetReader: a read tells deployed, being deleted and gone (NotFound); every other
// answer, Forbidden (a Role recreated) and Unauthorized (a token invalidated) included, is an
// error: it does not say whether the DaemonSet exists (issue 31 item 2).
func TestDaemonSetReader(t *testing.T) {
	now := metav1.Now()
	ds := func(deleting bool) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "portico-agent"}}
		if deleting {
			d.DeletionTimestamp, d.Finalizers = &now, []string{"foregroundDeletion"}
		}
		return d
	}
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		getErr  error // returned by every get, when set
		want    daemonSetState
		wantErr bool
	}{
		{name: "deployed", objects: []runtime.Object{ds(false)}, want: daemonSetDeployed},
		{name: "being deleted", objects: []runtime.Object{ds(true)}, want: daemonSetDeleting},
		{name: "gone", want: daemonSetGone},
		{name: "forbidden", objects: []runtime.Object{ds(false)}, getErr: apierrors.NewForbidden(gr, "portico-agent", errors.New("no Role")), wantErr: true},
		{name: "unauthorized", objects: []runtime.Object{ds(false)}, getErr: apierrors.NewUnauthorized("token of a recreated ServiceAccount"), wantErr: true},
		{name: "unreachable", objects: []runtime.Object{ds(false)}, getErr: apierrors.NewServiceUnavailable("apiserver down"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := kubefake.NewClientset(tc.objects...)
			if tc.getErr != nil {
				cs.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.getErr })
			}
			got, err := daemonSetReader(cs, "kube-system/portico-agent")(t.Context())
			if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
				t.Errorf("read %v, error %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	for _, ref := range []string{"", "portico-agent", "/portico-agent", "kube-system/"} {
		if daemonSetReader(kubefake.NewClientset(), ref) != nil {
			t.Errorf("daemonSetReader(%q) checks something; want nothing to check", ref)
		}
	}
	if daemonSetReader(nil, "kube-system/portico-agent") != nil {
		t.Error("daemonSetReader without a client checks something")
	}
}

// TestDaemonSetWatch: the watch follows the DaemonSet through its deletion timestamp and its
// deletion, and a DaemonSet created again counts as deployed again.
func TestDaemonSetWatch(t *testing.T) {
	ctx := t.Context()
	cs := kubefake.NewClientset(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "portico-agent"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "other"}})
	w := startDaemonSetWatch(cs, "kube-system/portico-agent", logr.Discard(), ctx.Done())
	waitSeen := func(want daemonSetState) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return w.seen() == want, nil
		}); err != nil {
			t.Fatalf("the watch saw the DaemonSet %v; want %v", w.seen(), want)
		}
	}
	waitSeen(daemonSetDeployed)
	dss := cs.AppsV1().DaemonSets("kube-system")
	if err := dss.Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, err := dss.Get(ctx, "portico-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	ds.DeletionTimestamp = &now
	if _, err := dss.Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(daemonSetDeleting)
	if w.seen() != daemonSetDeleting {
		t.Fatalf("another DaemonSet's deletion counted: %v", w.seen())
	}
	if err := dss.Delete(ctx, "portico-agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(daemonSetGone)
	if _, err := dss.Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "portico-agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(daemonSetDeployed)
	if startDaemonSetWatch(nil, "kube-system/portico-agent", logr.Discard(), ctx.Done()) != nil || startDaemonSetWatch(cs, "", logr.Discard(), ctx.Done()) != nil {
		t.Error("a watch without a client or a DaemonSet")
	}
	var none *daemonSetWatch
	if none.seen() != daemonSetUnknown {
		t.Error("no watch sees something")
	}
}

// TestUninstallingAt: the agent uninstalls only when a signal stopped it and its DaemonSet is
// gone or being deleted, as read at exit or, when the read fails, as last watched; its own
// failure, no --daemonset, a read that keeps failing (a 403 or a 401 among them) while the
// watch saw nothing of a deletion: restarts. Once uninstalling, the announcers see it
// (isUninstalling) and no restart hold is asked for.
func TestUninstallingAt(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	forbidden := apierrors.NewForbidden(gr, "portico-agent", errors.New("no Role"))
	unauthorized := apierrors.NewUnauthorized("invalid bearer token")
	unreachable := errors.New("apiserver unreachable")
	always := 1 << 30
	for _, tc := range []struct {
		name      string
		check     bool // a --daemonset check at all
		read      daemonSetState
		readErr   error
		failFirst int            // reads that fail with readErr before one answers read
		watched   daemonSetState // what the watch saw (none when unknown)
		signalled bool
		want      bool
	}{
		{name: "restart: DaemonSet deployed", check: true, read: daemonSetDeployed, signalled: true},
		{name: "uninstall: DaemonSet gone", check: true, read: daemonSetGone, signalled: true, want: true},
		{name: "uninstall: DaemonSet being deleted", check: true, read: daemonSetDeleting, signalled: true, want: true},
		{name: "own failure", check: true, read: daemonSetGone, signalled: false},
		{name: "no --daemonset", signalled: true},
		{name: "restart: forbidden", check: true, readErr: forbidden, failFirst: always, signalled: true},
		{name: "restart: unauthorized", check: true, readErr: unauthorized, failFirst: always, signalled: true},
		{name: "restart: forbidden, watched deployed", check: true, readErr: forbidden, failFirst: always, watched: daemonSetDeployed, signalled: true},
		{name: "restart: unreachable", check: true, readErr: unreachable, failFirst: always, signalled: true},
		{name: "uninstall: forbidden, watched gone", check: true, readErr: forbidden, failFirst: always, watched: daemonSetGone, signalled: true, want: true},
		{name: "uninstall: unauthorized, watched being deleted", check: true, readErr: unauthorized, failFirst: always, watched: daemonSetDeleting, signalled: true, want: true},
		{name: "restart: read deployed, watched gone (created again)", check: true, read: daemonSetDeployed, watched: daemonSetGone, signalled: true},
		{name: "uninstall: read again after two failures", check: true, read: daemonSetGone, readErr: unreachable, failFirst: 2, signalled: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultAgent()
			cfg.DaemonSet = "kube-system/portico-agent"
			cfg.Membership.Enabled = true
			a := &agent{cfg: cfg, log: logr.Discard()}
			if tc.watched != daemonSetUnknown {
				a.daemonSetWatch = &daemonSetWatch{ref: cfg.DaemonSet, log: logr.Discard()}
				a.daemonSetWatch.set(tc.watched)
			}
			calls := 0
			if tc.check {
				a.readDaemonSet = func(ctx context.Context) (daemonSetState, error) {
					calls++
					if _, ok := ctx.Deadline(); !ok {
						t.Error("the read runs without a deadline")
					}
					if calls <= tc.failFirst {
						return daemonSetUnknown, tc.readErr
					}
					return tc.read, nil
				}
			}
			a.uninstalling = a.uninstallingAt(tc.signalled, 2*time.Second)
			if a.uninstalling != tc.want {
				t.Errorf("uninstalling %v, want %v", a.uninstalling, tc.want)
			}
			if tc.failFirst > 0 && tc.failFirst < always && calls != tc.failFirst+1 {
				t.Errorf("%d reads, want %d: the failed ones tried again", calls, tc.failFirst+1)
			}
			if tc.failFirst == always && tc.watched == daemonSetUnknown && (calls < 3 || calls > 5) {
				t.Errorf("%d reads refused in 2 s; want 3 to 5, backing off", calls)
			}
			if !tc.signalled && calls > 0 {
				t.Error("an agent failing on its own read its DaemonSet")
			}
			if got := a.isUninstalling(); got != tc.want {
				t.Errorf("isUninstalling = %v; want %v", got, tc.want)
			}
			if tc.want {
				if hold := a.exitHoldFor(true); hold != 0 {
					t.Errorf("an uninstalled agent asks for a restart hold of %v", hold)
				}
			}
		})
	}
}

// TestExitWithinGracePeriod: the agent's worst-case exit at an uninstall (every step at its
// bound) ends at least a second before the chart's terminationGracePeriodSeconds, when the
// kubelet would kill it with its rules in place.
func TestExitWithinGracePeriod(t *testing.T) {
	raw, err := os.ReadFile("../deploy/chart/portico/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Agent struct {
			TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
		} `json:"agent"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(values.Agent.TerminationGracePeriodSeconds) * time.Second
	if grace == 0 {
		t.Fatal("the chart's values.yaml has no agent.terminationGracePeriodSeconds")
	}
	if exitWorstCase+time.Second > grace {
		t.Errorf("the agent may take %v to exit at an uninstall; the chart gives it %v", exitWorstCase, grace)
	}
}

// TestUninstallingAtLogsTheAPIAnswer: the decision's line names the API server's refusal, not a
// later try's client-side error (the rate limiter's, a deadline).
func TestUninstallingAtLogsTheAPIAnswer(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	cfg := config.DefaultAgent()
	cfg.DaemonSet = "kube-system/portico-agent"
	a := &agent{cfg: cfg, log: log}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "portico-agent", errors.New("no Role"))
	calls := 0
	a.readDaemonSet = func(context.Context) (daemonSetState, error) {
		calls++
		if calls == 1 {
			return daemonSetUnknown, forbidden
		}
		return daemonSetUnknown, errors.New("client rate limiter Wait returned an error")
	}
	if a.uninstallingAt(true, time.Second) {
		t.Fatal("uninstalling after a 403")
	}
	logged := strings.Join(lines, "\n")
	if !strings.Contains(logged, `"decision"="restart"`) || !strings.Contains(logged, "forbidden") {
		t.Errorf("the decision's line does not name the 403:\n%s", logged)
	}
}
