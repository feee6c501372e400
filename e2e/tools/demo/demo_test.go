package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/process"
)

// TestAWSDemo builds the demo and runs `demo -provider=aws` from the repository root, as
// `make demo DEMO=aws` does: it must exit 0 (the walk-through checks what moto holds and that
// deletion leaves nothing tagged, and exits 1 otherwise) and show each part of the story.
// Without moto_server 5.2.5 the demo exits 1 naming `make prereqs`, and so does this test.
func TestAWSDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := gobuild.BinaryForTest(t, "e2e/tools/demo")
	p := process.StartForTest(t, bin, process.Options{Name: "demo", Args: []string{"-provider=aws"}, Dir: root})
	err = p.Wait(ctx)
	if ctx.Err() != nil {
		// SIGTERM lets the demo stop what it started.
		_ = p.Stop(30 * time.Second)
	}
	b, rerr := os.ReadFile(p.LogPath())
	if rerr != nil {
		t.Fatal(rerr)
	}
	out := string(b)
	if err != nil {
		t.Fatalf("demo -provider=aws: %v\n%s", err, out)
	}
	for _, want := range []string{
		"network load balancer k8s-webnlb-",
		"classic load balancer k8s-webclass-",
		".elb.amazonaws.com",                   // the DNS name, in EXTERNAL-IP and in moto
		"TLS:443 with certificate arn:aws:acm", // the NLB's TLS listener
		"SSL:443 with certificate arn:aws:acm", // the Classic ELB's
		"Warning  InvalidSpec",                 // demo/typo's Event
		"LoadBalancerReady=False InvalidSpec:", // and condition, as kubectl get -o jsonpath prints it
		"moto holds no load balancer, listener, target group, security group or address tagged",
		"Demo took",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// TestClusterDemo runs `demo -provider=cluster` from the repository root, as `make demo
// DEMO=cluster` does: it must exit 0 (it fails when the VIP is not served, the upgrade fails
// a request, or a node keeps a chain of the agent after uninstall) and tell each part.
func TestClusterDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := gobuild.BinaryForTest(t, "e2e/tools/demo")
	p := process.StartForTest(t, bin, process.Options{Name: "demo", Args: []string{"-provider=cluster"}, Dir: root})
	err = p.Wait(ctx)
	if ctx.Err() != nil {
		_ = p.Stop(60 * time.Second)
	}
	b, rerr := os.ReadFile(p.LogPath())
	if rerr != nil {
		t.Fatal(rerr)
	}
	out := string(b)
	if err != nil {
		t.Fatalf("demo -provider=cluster: %v\n%s", err, out)
	}
	for _, want := range []string{
		"3 nodes Ready in",
		"(pending: no load-balancer controller",
		"agents Ready on every node",
		"web   LoadBalancer  198.18.221.",
		"web.default.svc.cluster.local -> 198.18.",
		"failed\n",
		"node3: 0 PTC- chains left",
		"Demo took",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
