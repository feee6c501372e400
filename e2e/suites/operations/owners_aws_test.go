package operations_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/e2e/framework/process"
)

// TestOwnersConfigEditKeepsNLB (issue 31 item 1), the AWS flavour: the portico-controller
// binary with the AWS provider (against moto) provisions an NLB, then restarts with its class
// removed: the NLB is still in AWS under the same DNS name, which the Service still reports. At
// 3e563f2 the restart deleted the NLB (a new one, with a new DNS name, once the class is back).
func TestOwnersConfigEditKeepsNLB(t *testing.T) {
	e := ownersSetup(t)
	srv := moto.Start(t)
	const clusterName = "owners-aws"
	f := srv.Seed(t, moto.SeedOptions{Cluster: clusterName, AZs: 2, Nodes: 2})
	ctx := context.Background()
	for _, n := range f.Nodes {
		node := f.KubeNode(n, nil)
		status := node.Status
		created, err := e.cl.Client().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = status
		if _, err := e.cl.Client().CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bin := gobuild.BinaryForTest(t, "cmd/portico-controller")
	start := func(class string) *process.Process {
		return process.StartForTest(t, bin, process.Options{Name: "portico-controller", Args: []string{
			"--kubeconfig=" + e.cl.KubeconfigPath(), "--class=" + ownersClass(class) + "=aws",
			"--aws-endpoint=" + srv.URL, "--aws-region=" + srv.Region, "--cluster-name=" + clusterName,
			"--leader-elect=false", "--leader-election-namespace=" + e.ns, "--leader-election-id=portico",
			"--metrics-bind-address=0", "--health-probe-bind-address=0",
		}, Env: append(append(os.Environ(), srv.Env()...), "AWS_ENDPOINT_URL="+srv.URL)})
	}

	p := start("nlb")
	e.lb("web", "nlb", func(s *corev1.Service) { s.Annotations[annotations.AWSLoadBalancerType] = "nlb" })
	svc := e.svcs.Wait("web", "an NLB hostname", func(s *corev1.Service) string {
		if len(s.Status.LoadBalancer.Ingress) == 0 || s.Status.LoadBalancer.Ingress[0].Hostname == "" {
			return "no hostname"
		}
		return ""
	})
	dns := svc.Status.LoadBalancer.Ingress[0].Hostname
	if err := p.Stop(10 * time.Second); err != nil {
		t.Logf("stopping portico-controller: %v", err)
	}

	start("other") // the edit: class nlb removed
	e.notServed("web")
	e.unchanged(svc, "owners/portico")
	if held, err := srv.HoldsLoadBalancer(ctx, dns); err != nil || !held {
		t.Errorf("AWS no longer holds the NLB %s after the edit (err %v)", dns, err)
	}
	t.Logf("NLB %s kept, Service still reports it", dns)
}
