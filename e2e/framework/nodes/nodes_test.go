package nodes

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// childEnv makes the test binary run TestKilledRunChild as a cluster owner to be killed.
const childEnv = "PORTICO_NODES_KILLED_RUN_CHILD"

// TestKilledRunIsSwept: a test binary killed with SIGKILL while its one-node cluster runs a pod
// leaves containers, a shim, cgroups, mounts, its lab and its state behind (Leftovers sees
// them); Sweep and netlab.Sweep, what `make clean-lab` and the next Start run, remove all of it.
func TestKilledRunIsSwept(t *testing.T) {
	prereq.RequireRoot(t, requiredPackages()...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledRunChild$", "-test.v", "-test.timeout=5m")
	child.Env = append(os.Environ(), childEnv+"=1")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var dir, labID string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "CLUSTER %s %s", &dir, &labID); err == nil {
			break
		}
		t.Logf("child: %s", sc.Text())
	}
	if dir == "" {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatal("the child exited without reporting a running cluster")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// The container and its shim outlive the killed owner (the daemons die with it).
	left, err := Leftovers(dir, labID)
	if err != nil {
		t.Fatal(err)
	}
	if !hasLeftover(left, "in cgroup") || !hasLeftover(left, "network namespace") || !hasLeftover(left, "directory") {
		t.Fatalf("the killed run left %q; want processes in its cgroups, its lab's namespaces and its directory", left)
	}
	t.Logf("the killed run left %d things, e.g. %s", len(left), left[0])

	if err := Sweep(); err != nil {
		t.Errorf("Sweep: %v", err)
	}
	if err := netlab.Sweep(); err != nil {
		t.Errorf("netlab.Sweep: %v", err)
	}
	// Processes killed by the sweep may take a moment to be reaped and leave their mount
	// namespace (and the mounts under dir with it).
	wait.For(t, 30*time.Second, "nothing left of the killed run", func() error {
		left, err := Leftovers(dir, labID)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left:\n%s", strings.Join(left, "\n"))
		}
		return nil
	})
}

func hasLeftover(left []string, kind string) bool {
	for _, l := range left {
		if strings.Contains(l, kind) {
			return true
		}
	}
	return false
}

// TestKilledRunChild is TestKilledRunIsSwept's child: it starts a one-node cluster with a
// running pod, reports it, and waits to be killed.
func TestKilledRunChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestKilledRunIsSwept")
	}
	c, err := Start(t.Context(), Options{Nodes: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Client()
	wait.For(t, time.Minute, "the default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(t.Context(), "default", metav1.GetOptions{})
		return err
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "echo", Image: c.EchoImage, ImagePullPolicy: corev1.PullNever, Args: []string{"-tcp", "8080"},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the pod running", func() error {
		p, err := cs.CoreV1().Pods("default").Get(t.Context(), "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	fmt.Printf("CLUSTER %s %s\n", c.Dir, c.Lab.ID())
	<-t.Context().Done() // the parent kills this process here
}
