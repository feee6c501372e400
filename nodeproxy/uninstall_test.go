package nodeproxy

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/go-logr/logr"

	"github.com/portico-lb/portico/config"
)

// TestDaemonSetDeployed: the agent counts as deployed while its DaemonSet exists and is not
// being deleted; gone, being deleted, Forbidden (its Role deleted) and Unauthorized (its
// ServiceAccount deleted) are an uninstall; any other error is reported, not guessed.
func TestDaemonSetDeployed(t *testing.T) {
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
		name     string
		objects  []runtime.Object
		getErr   error // returned by every get, when set
		deployed bool
		wantErr  bool
	}{
		{name: "deployed", objects: []runtime.Object{ds(false)}, deployed: true},
		{name: "being deleted", objects: []runtime.Object{ds(true)}},
		{name: "gone"},
		{name: "forbidden", objects: []runtime.Object{ds(false)}, getErr: apierrors.NewForbidden(gr, "portico-agent", errors.New("no Role"))},
		{name: "unauthorized", objects: []runtime.Object{ds(false)}, getErr: apierrors.NewUnauthorized("token of a deleted ServiceAccount")},
		{name: "unreachable", objects: []runtime.Object{ds(false)}, getErr: apierrors.NewServiceUnavailable("apiserver down"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := kubefake.NewClientset(tc.objects...)
			if tc.getErr != nil {
				cs.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.getErr })
			}
			check := daemonSetDeployed(cs, "kube-system/portico-agent")
			deployed, err := check(t.Context())
			if (err != nil) != tc.wantErr || deployed != tc.deployed {
				t.Errorf("deployed %v, error %v; want %v, error %v", deployed, err, tc.deployed, tc.wantErr)
			}
		})
	}
	for _, ref := range []string{"", "portico-agent"} {
		if daemonSetDeployed(kubefake.NewClientset(), ref) != nil {
			t.Errorf("daemonSetDeployed(%q) checks something; want nothing to check", ref)
		}
	}
	if daemonSetDeployed(nil, "kube-system/portico-agent") != nil {
		t.Error("daemonSetDeployed without a client checks something")
	}
}

// TestUninstallingAt: the agent uninstalls only when a signal stopped it and its DaemonSet is
// not deployed; its own failure, no --daemonset, or a check that fails are restarts. Once
// uninstalling, the announcers see it (isUninstalling) and no restart hold is asked for.
func TestUninstallingAt(t *testing.T) {
	unreachable := errors.New("apiserver unreachable")
	for _, tc := range []struct {
		name      string
		check     bool // a --daemonset check at all
		deployed  bool
		checkErr  error
		failFirst int // reads that fail with checkErr before one answers deployed
		signalled bool
		want      bool
	}{
		{name: "restart: DaemonSet deployed", check: true, deployed: true, signalled: true},
		{name: "uninstall: DaemonSet gone", check: true, signalled: true, want: true},
		{name: "own failure", check: true, signalled: false},
		{name: "no --daemonset", signalled: true},
		{name: "check failed", check: true, checkErr: unreachable, failFirst: 1 << 30, signalled: true},
		{name: "uninstall: read again after two failures", check: true, checkErr: unreachable, failFirst: 2, signalled: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultAgent()
			cfg.DaemonSet = "kube-system/portico-agent"
			cfg.Membership.Enabled = true
			a := &agent{cfg: cfg, log: logr.Discard()}
			calls := 0
			if tc.check {
				a.deployed = func(ctx context.Context) (bool, error) {
					calls++
					if _, ok := ctx.Deadline(); !ok {
						t.Error("the check runs without a deadline")
					}
					if calls <= tc.failFirst {
						return false, tc.checkErr
					}
					return tc.deployed, nil
				}
			}
			a.uninstalling = a.uninstallingAt(tc.signalled, 2*time.Second)
			if a.uninstalling != tc.want {
				t.Errorf("uninstalling %v, want %v", a.uninstalling, tc.want)
			}
			if tc.failFirst > 0 && tc.failFirst < 1<<30 && calls != tc.failFirst+1 {
				t.Errorf("%d reads, want %d: the failed ones tried again", calls, tc.failFirst+1)
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
