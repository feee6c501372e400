package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, "-provider=aws")
	cmd.Dir = root
	// SIGTERM on timeout lets the demo stop what it started; Pdeathsig covers a killed test.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
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
		"LoadBalancerReady=False  InvalidSpec", // and condition
		"moto holds no load balancer, listener, target group, security group or address tagged",
		"Demo took",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
