package ccm_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/e2e/framework/ports"
)

// TestDeployRBAC applies deploy/ccm (RBAC for real, the Deployment as a server-side dry run)
// and runs portico-ccm with the Deployment's own flags, --use-service-account-credentials
// among them, authenticated as the portico-ccm ServiceAccount (a token from the TokenRequest
// API), with the AWS provider against moto. An NLB Service is provisioned, replaced by an
// internal one (the adapter's replacement follow-up, a client of its own) and deleted; if a
// rule is missing the Service never gets its finalizer, status, Event or clean deletion, or the
// log reports a request the API server forbade, and the test fails.
func TestDeployRBAC(t *testing.T) {
	var bin string
	built := make(chan error, 1)
	go func() { b, err := buildCCM(); bin = b; built <- err }()
	c := cluster.StartForTest(t, cluster.Options{Controllers: []string{}})
	srv := moto.Start(t)
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	const manifests = "../../../deploy/ccm"
	for _, path := range []string{"rbac.yaml", "deployment.yaml"} {
		if err := c.Apply(ctx, filepath.Join(manifests, path), "Deployment"); err != nil {
			t.Fatal(err)
		}
	}
	// kube-apiserver's bootstrap policy binds system:controller:service-controller to
	// kube-system/service-controller; without that binding the manifest alone must suffice.
	dropOtherBindings(t, ctx, c, "portico-ccm", "service-controller", "portico-ccm-replacements")
	deployArgs := manifestArgs(t, filepath.Join(manifests, "deployment.yaml"))
	if !containsArg(deployArgs, "--use-service-account-credentials") {
		t.Fatalf("deploy/ccm/deployment.yaml does not pass --use-service-account-credentials: %v", deployArgs)
	}

	cs := c.Client()
	tok, err := cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "portico-ccm",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "portico-ccm.kubeconfig")
	if err := c.WriteKubeconfigWithToken(kubeconfig, c.Host(), tok.Status.Token); err != nil {
		t.Fatal(err)
	}

	const clusterName = "ccm-rbac"
	f := srv.Seed(t, moto.SeedOptions{Cluster: clusterName, AZs: 2, Nodes: 2})
	for _, n := range f.KubeNodes() {
		status := n.Status
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cloudConfig := writeCloudConfig(t, fmt.Sprintf("provider: aws\naws:\n  region: %s\n  endpoint: %s\n", srv.Region, srv.URL))

	// The Deployment's flags, then what differs outside a pod: the credentials (in a pod, the
	// mounted token), the cloud config, the cluster name, a loopback port, short Lease timings.
	// The delegated authentication and authorization of the secure port use the ServiceAccount
	// too, as in a pod.
	port := ports.ForTest(t)
	args := append(deployArgs,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--cloud-config="+cloudConfig,
		"--cluster-name="+clusterName,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--v=2",
	)
	ccm := startCCMWith(t, bin, args, append(os.Environ(), srv.Env()...), port)

	ns := namespace(t, c, "rbac")
	// The secure port authenticates and authorizes through the API server as portico-ccm
	// (TokenReview, SubjectAccessReview): a scraper allowed to get /metrics reads them.
	scrapeMetrics(t, ctx, c, ns, port)
	svc := createService(t, cs, lbService(ns, "web", func(s *corev1.Service) {
		s.Annotations = map[string]string{annotations.AWSLoadBalancerType: "nlb"}
	}))
	got := waitService(t, ccm, cs, ns, "web", "a DNS name and the stock finalizer", func(s *corev1.Service) bool {
		ing := s.Status.LoadBalancer.Ingress
		return len(ing) == 1 && ing[0].Hostname != "" && hasFinalizer(s)
	})
	first := got.Status.LoadBalancer.Ingress[0].Hostname
	waitEvent(t, ccm, cs, svc, "EnsuredLoadBalancer", "")
	lbs := waitLBs(t, ccm, srv, clusterName, string(svc.UID), 1)
	if lbs[0].Kind != moto.KindLoadBalancer {
		t.Errorf("moto holds %s for the Service, want an NLB", lbs[0])
	}

	// A scheme change is a replacement: the stock controller writes the new status, and the
	// adapter's own client reads the Service back to delete the old load balancer.
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		s, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Annotations[annotations.AWSLoadBalancerScheme] = "internal"
		_, err = cs.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitService(t, ccm, cs, ns, "web", "the replacement's DNS name", func(s *corev1.Service) bool {
		ing := s.Status.LoadBalancer.Ingress
		return len(ing) == 1 && ing[0].Hostname != "" && ing[0].Hostname != first
	})
	lbs = waitLBs(t, ccm, srv, clusterName, string(svc.UID), 1)
	if v := lbs[0].Tags["portico-lb.io/replaces"]; v != "" {
		t.Errorf("the replacement still carries portico-lb.io/replaces=%s", v)
	}

	if err := cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ccm, cs, ns, "web")
	if inv := srv.Owned(t, clusterName); len(inv) > 0 {
		t.Errorf("left in moto after deletion:\n%s", inv)
	}

	// The per-controller accounts did the work: portico-ccm's own rules allow no Service
	// writes, so the finalizer and status above prove --use-service-account-credentials took
	// effect. Anything the API server refused is a missing rule.
	ccm.checkAlive(t)
	if lines := forbidden(t, ccm.LogPath()); len(lines) > 0 {
		t.Errorf("portico-ccm's log reports requests the API server forbade (a rule is missing from deploy/ccm/rbac.yaml):\n%s", strings.Join(lines, "\n"))
	}
}

// waitLBs waits until moto holds exactly want load balancers tagged for the Service uid, with
// no replacement pending, and returns them.
func waitLBs(t *testing.T, p *ccmProcess, srv *moto.Server, clusterName, uid string, want int) moto.Inventory {
	t.Helper()
	var last moto.Inventory
	helper(t, p, nil, "").Eventually(fmt.Sprintf("moto to hold %d load balancers for Service %s", want, uid), func() error {
		last = nil
		for _, r := range srv.Owned(t, clusterName) {
			if (r.Kind == moto.KindLoadBalancer || r.Kind == moto.KindClassicLB) && r.Tags["portico-lb.io/service-uid"] == uid {
				last = append(last, r)
			}
		}
		if len(last) == want && (want == 0 || last[0].Tags["portico-lb.io/replaces"] == "") {
			return nil
		}
		return fmt.Errorf("it holds %d:\n%s", len(last), last)
	})
	return last
}

// forbidden returns the log lines of portico-ccm that report a request refused by RBAC.
func forbidden(t *testing.T, logPath string) []string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?i)\bis forbidden\b|\bForbidden\b`)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// manifestArgs returns the args of the first container of the Deployment in a manifest.
func manifestArgs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.Kind == "Deployment" && len(d.Spec.Template.Spec.Containers) > 0 {
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatalf("%s holds no Deployment", path)
	return nil
}

// containsArg reports whether args set the boolean flag arg (as arg or arg=true).
func containsArg(args []string, arg string) bool {
	return slices.Contains(args, arg) || slices.Contains(args, arg+"=true")
}

// dropOtherBindings deletes every ClusterRoleBinding and RoleBinding that names one of the
// kube-system ServiceAccounts and was not made by deploy/ccm (whose names start with
// portico-ccm), so that those accounts hold exactly what the manifest grants them.
func dropOtherBindings(t *testing.T, ctx context.Context, c *cluster.Cluster, accounts ...string) {
	t.Helper()
	names := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "kube-system" && slices.Contains(accounts, s.Name) {
				return true
			}
		}
		return false
	}
	rbac := c.Client().RbacV1()
	crbs, err := rbac.ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		if names(b.Subjects) && !strings.HasPrefix(b.Name, "portico-ccm") {
			t.Logf("deleting ClusterRoleBinding %s (role %s)", b.Name, b.RoleRef.Name)
			if err := rbac.ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rbs, err := rbac.RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rbs.Items {
		if names(b.Subjects) && !strings.HasPrefix(b.Name, "portico-ccm") {
			t.Logf("deleting RoleBinding %s/%s (role %s)", b.Namespace, b.Name, b.RoleRef.Name)
			if err := rbac.RoleBindings(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// scrapeMetrics creates a ServiceAccount allowed to get /metrics and reads portico-ccm's
// /metrics with its token: 200 only if portico-ccm may create TokenReviews and
// SubjectAccessReviews (401 without the first, 403 without the second).
func scrapeMetrics(t *testing.T, ctx context.Context, c *cluster.Cluster, ns string, port int) {
	t.Helper()
	cs := c.Client()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Status.Token)
	// The new binding reaches the API server's authorizer cache within a moment.
	var status string
	for range 50 {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		status = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("GET /metrics as a ServiceAccount allowed to: %s (portico-ccm cannot review tokens or access?)", status)
}
