package operations_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-lb/portico/e2e/framework/labcluster"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// TestAgentExitDecision (issue 31 item 2): an agent stopped by SIGTERM removes its rules only
// when its DaemonSet is gone or being deleted, never because the API server refused to show
// it. On a real control plane, with deploy/agent.yaml's RBAC and ServiceAccount (the chart's,
// rendered) and the agent run as that ServiceAccount's token in a lab node's namespace with a
// Service programmed, each case makes a fault happen, waits until it is in force for the
// agent's credentials, sends SIGTERM and reads the agent's decision and the node's nftables
// table:
//
//   - the Role on its DaemonSet deleted (a GitOps sync recreating it): the read gets 403;
//     restart, the rules stay;
//   - its ServiceAccount deleted and created again (its token now invalid): 401; restart, the
//     rules stay;
//   - the DaemonSet deleted: NotFound; uninstall, the table is gone;
//   - helm uninstall's order (the DaemonSet, then the Role, RoleBinding and ServiceAccount,
//     before the pods stop): the read is refused, the watch saw the deletion; uninstall.
//
// On 3e563f2 the first two removed every rule ("gone, being deleted or unreadable:
// uninstalling").
func TestAgentExitDecision(t *testing.T) {
	prereq.RequireRoot(t, prereq.IPRoute2, prereq.NFTables)
	env := agentExitEnv(t)
	node := env.Lab.Nodes()[0]
	for _, tc := range []struct {
		name string
		// fault happens before SIGTERM; it returns the error the agent's own credentials must
		// get reading the DaemonSet before the signal is sent (nil: any answer).
		fault      func(t *testing.T, cs kubernetes.Interface) func(error) bool
		want       string // the decision: restart or uninstall
		wantReason string // in the decision's line
	}{
		{
			name: "Role deleted (403)",
			fault: func(t *testing.T, cs kubernetes.Interface) func(error) bool {
				agentExitDelete(t, cs.RbacV1().Roles(agentExitNS).Delete, agentExitRole)
				return apierrors.IsForbidden
			},
			want: "restart", wantReason: "forbidden",
		},
		{
			name: "ServiceAccount created again (401)",
			fault: func(t *testing.T, cs kubernetes.Interface) func(error) bool {
				agentExitDelete(t, cs.CoreV1().ServiceAccounts(agentExitNS).Delete, agentExitName)
				wait.For(t, 30*time.Second, "the ServiceAccount deleted", func() error {
					_, err := cs.CoreV1().ServiceAccounts(agentExitNS).Get(t.Context(), agentExitName, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return nil
					}
					return fmt.Errorf("still there (%v)", err)
				})
				sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentExitNS, Name: agentExitName}}
				if _, err := cs.CoreV1().ServiceAccounts(agentExitNS).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				return apierrors.IsUnauthorized
			},
			want: "restart", wantReason: "Unauthorized",
		},
		{
			name: "DaemonSet deleted",
			fault: func(t *testing.T, cs kubernetes.Interface) func(error) bool {
				agentExitDelete(t, cs.AppsV1().DaemonSets(agentExitNS).Delete, agentExitName)
				return apierrors.IsNotFound
			},
			want: "uninstall", wantReason: "read: the DaemonSet is gone",
		},
		{
			name: "helm uninstall order: DaemonSet, Role, RoleBinding, ServiceAccount",
			fault: func(t *testing.T, cs kubernetes.Interface) func(error) bool {
				agentExitDelete(t, cs.AppsV1().DaemonSets(agentExitNS).Delete, agentExitName)
				agentExitDelete(t, cs.RbacV1().Roles(agentExitNS).Delete, agentExitRole)
				agentExitDelete(t, cs.RbacV1().RoleBindings(agentExitNS).Delete, agentExitRole)
				agentExitDelete(t, cs.CoreV1().ServiceAccounts(agentExitNS).Delete, agentExitName)
				return func(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }
			},
			want: "uninstall", wantReason: "watched: the DaemonSet is gone",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			cs := env.CS
			if err := env.Cluster.Apply(ctx, "../../../deploy/agent.yaml"); err != nil {
				t.Fatal(err)
			}
			token, kubeconfig := agentExitToken(t, env)
			asAgent := agentExitClient(t, env, token)
			// A Service for the node to serve: its ClusterIP in the agent's table.
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "exit-", Namespace: "default"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "none"}},
			}
			svc, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cs.CoreV1().Services("default").Delete(context.WithoutCancel(ctx), svc.Name, metav1.DeleteOptions{})
			})

			p, err := node.Start(env.Agent, "--kubeconfig="+kubeconfig, "--hostname-override="+node.Name,
				"--daemonset="+agentExitNS+"/"+agentExitName, "--healthz-bind-address=0", "--metrics-bind-address=0", "-v=1")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = p.Stop()
				// The next case starts from a node without the agent's rules.
				if out, err := node.Exec(context.WithoutCancel(ctx), env.Agent, "--cleanup"); err != nil {
					t.Errorf("portico-agent --cleanup: %v\n%s", err, out)
				}
			})
			logTail := func() string { return "agent log:\n" + agentExitTail(p.Output(), 40) }
			wait.For(t, 90*time.Second, "the agent watching its DaemonSet and serving the Service", func() error {
				if !strings.Contains(p.Output(), `"Watching the agent's DaemonSet"`) {
					return errors.New(`no "Watching the agent's DaemonSet" line`)
				}
				if !agentExitServes(ctx, node, svc.Spec.ClusterIP) {
					return fmt.Errorf("no rule for %s in table ip portico", svc.Spec.ClusterIP)
				}
				return nil
			}, logTail)

			isFault := tc.fault(t, cs)
			// The fault in force for the agent's own credentials (the API server caches RBAC and
			// tokens for a few seconds).
			wait.For(t, 60*time.Second, "the agent's credentials to meet the fault reading the DaemonSet", func() error {
				_, err := asAgent.AppsV1().DaemonSets(agentExitNS).Get(ctx, agentExitName, metav1.GetOptions{})
				if isFault(err) {
					return nil
				}
				return fmt.Errorf("the read answered %v", err)
			})

			signalled := time.Now()
			if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("the agent did not exit within 30 s of SIGTERM\n%s", logTail())
			}
			exited := time.Since(signalled)
			decision := agentExitDecisionLine(p.Output())
			t.Logf("SIGTERM to exit %v; %s", exited.Round(time.Millisecond), decision)
			if !strings.Contains(decision, `decision="`+tc.want+`"`) || !strings.Contains(decision, tc.wantReason) {
				t.Errorf("decision %q; want decision=%q with reason %q\n%s", decision, tc.want, tc.wantReason, logTail())
			}
			if strings.Contains(p.Output(), "Cannot watch the agent's DaemonSet") {
				t.Errorf("the chart's Role does not let the agent watch its DaemonSet\n%s", logTail())
			}
			serving, tables := agentExitServes(ctx, node, svc.Spec.ClusterIP), agentExitTables(ctx, node)
			switch tc.want {
			case "restart":
				if !serving {
					t.Errorf("after a restart's SIGTERM the node no longer serves %s; tables: %s\n%s", svc.Spec.ClusterIP, tables, logTail())
				}
			case "uninstall":
				if strings.Contains(tables, " portico") {
					t.Errorf("after an uninstall the agent's table stays: %s\n%s", tables, logTail())
				}
			}
		})
	}
}

// The agent's objects in deploy/agent.yaml.
const (
	agentExitNS   = "kube-system"
	agentExitName = "portico-agent"
	agentExitRole = "portico-agent-daemonset"
)

// agentExitEnv starts a lab of one node and a control plane for the test, closed at its end.
func agentExitEnv(t *testing.T) *labcluster.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	env, err := labcluster.New(ctx, labcluster.Options{Prefix: "portico-e2e-ops-exit-", Lab: netlab.Options{Nodes: 1}})
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// agentExitToken returns a token of the agent's ServiceAccount and a kubeconfig holding it.
func agentExitToken(t *testing.T, env *labcluster.Env) (token, kubeconfig string) {
	t.Helper()
	expiry := int64(3600)
	tok, err := env.CS.CoreV1().ServiceAccounts(agentExitNS).CreateToken(t.Context(), agentExitName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Cluster.WriteKubeconfigWithToken(kubeconfig, env.Cluster.Host(), tok.Status.Token); err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token, kubeconfig
}

// agentExitClient is a client with the agent's credentials.
func agentExitClient(t *testing.T, env *labcluster.Env, token string) kubernetes.Interface {
	t.Helper()
	cfg := env.Cluster.Config()
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// agentExitDelete deletes name with the default (background) propagation, as helm uninstall
// does: gone at once, dependents left to the garbage collector.
func agentExitDelete(t *testing.T, del func(context.Context, string, metav1.DeleteOptions) error, name string) {
	t.Helper()
	if err := del(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s: %v", name, err)
	}
}

// agentExitServes reports whether the node's table ip portico has a rule for ip.
func agentExitServes(ctx context.Context, node *netlab.Node, ip string) bool {
	out, err := node.Exec(ctx, "nft", "list", "table", "ip", "portico")
	return err == nil && strings.Contains(string(out), ip)
}

// agentExitTables lists the node's nftables tables.
func agentExitTables(ctx context.Context, node *netlab.Node) string {
	out, err := node.Exec(ctx, "nft", "list", "tables")
	if err != nil {
		return fmt.Sprintf("nft list tables: %v: %s", err, out)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(out), "table", "|table")), " ")
}

// agentExitDecisionLine is the agent's log line with its exit decision.
func agentExitDecisionLine(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"Stopping"`) && strings.Contains(line, "decision=") {
			return line
		}
	}
	return "(no decision logged)"
}

func agentExitTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
