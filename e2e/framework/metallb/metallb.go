// Package metallb builds MetalLB's controller and speaker (go.universe.tf/metallb, pinned) from
// the Go module proxy into Portico's cache, once, and finds the module's CRD manifests
// (config/crd/bases), so that a suite can install MetalLB's API and run the real MetalLB as a
// process: the anchor of the migration test (e2e/suites/migration).
//
// The module cannot be built as its go.mod says: it requires github.com/metallb/frr-k8s
// v0.0.25, which the module proxy does not serve. frr-k8s is the FRR-K8s BGP back end only (its
// API types, imported by the controller and the speaker for BGP configuration); Ensure builds
// MetalLB inside a wrapper module (k8sbin.EnsureModule) that replaces it with v0.0.21, the
// newest version served. Neither the controller's allocation nor the speaker's L2 and native BGP
// modes run frr-k8s code.
package metallb

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/internal/prereq"
)

// Pinned versions.
const (
	Version       = "v0.16.1"
	Module        = "go.universe.tf/metallb"
	frrK8s        = "github.com/metallb/frr-k8s"
	frrK8sStandIn = "v0.0.21"
	// Controller and Speaker are the binaries' names in the cache.
	Controller = "metallb-controller"
	Speaker    = "metallb-speaker"
)

// Options tune Ensure.
type Options struct {
	// CacheDir is where the wrapper module and the binaries live; empty means prereq.CacheDir().
	CacheDir string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Built is what Ensure returns.
type Built struct {
	// Controller and Speaker are the binaries' paths.
	Controller, Speaker string
	// CRDDir holds the module's CustomResourceDefinition manifests (config/crd/bases).
	CRDDir string
}

// Ensure returns MetalLB's binaries, building them with k8sbin.EnsureModule when missing
// (<cache>/bin/metallb-<Version>; wrapper module in <cache>/src/go.universe.tf_metallb@<Version>),
// and the directory of its CRDs in the module cache. Concurrent callers serialise on the lock
// file metallb-build.lock in the cache. A cold build downloads about 200 modules and compiles
// the controller-runtime stack: several minutes on 2 cores.
func Ensure(ctx context.Context, o Options) (Built, error) {
	if o.CacheDir == "" {
		o.CacheDir = prereq.CacheDir()
	}
	m := k8sbin.Module{
		Path:    Module,
		Version: Version,
		Pins:    map[string]string{frrK8s: frrK8sStandIn},
		Cmds:    map[string]string{Controller: Module + "/controller", Speaker: Module + "/speaker"},
	}
	dir, err := k8sbin.EnsureModule(ctx, k8sbin.Options{CacheDir: o.CacheDir, Log: o.Log}, m, "metallb-"+Version, "metallb-build.lock")
	if err != nil {
		return Built{}, fmt.Errorf("ensuring metallb %s: %w", Version, err)
	}
	crds, err := crdDir(ctx, filepath.Join(o.CacheDir, "src", strings.ReplaceAll(Module, "/", "_")+"@"+Version))
	if err != nil {
		return Built{}, err
	}
	return Built{Controller: filepath.Join(dir, Controller), Speaker: filepath.Join(dir, Speaker), CRDDir: crds}, nil
}

// crdDir asks the go command, in the wrapper module wrapper, where the module's source is.
func crdDir(ctx context.Context, wrapper string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", Module)
	cmd.Dir = wrapper
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding %s's source: %w\n%s", Module, err, stderr.Bytes())
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	if _, err := os.Stat(filepath.Join(dir, "metallb.io_ipaddresspools.yaml")); err != nil {
		return "", fmt.Errorf("metallb's CRDs: %w", err)
	}
	return dir, nil
}

// ControllerArgs are the flags the suites run MetalLB's controller with: namespace ns, its own
// Pod pod (the controller reads it at start to own what it creates: create it with OwnPod), no
// webhook (the test API server has no route to one) and no certificate rotation, metrics and
// health probes on the given free ports.
func ControllerArgs(ns, pod string, metricsPort, healthPort int) []string {
	return []string{
		"--namespace=" + ns, "--pod-name=" + pod, "--webhook-mode=disabled", "--disable-cert-rotation=true",
		fmt.Sprintf("--port=%d", metricsPort), fmt.Sprintf("--health-probe-port=%d", healthPort),
		"--log-level=info",
	}
}

// SpeakerArgs are the flags the suites run MetalLB's speaker with on node node (in the node's
// network namespace, as the speaker's hostNetwork pod runs): namespace ns, its own Pod pod
// (create it with SpeakerPod), metrics and health probes on the given ports, memberlist off
// (no --ml-bindaddr: every node is taken as running a speaker, as MetalLB does without it) and
// the native BGP implementation (METALLB_BGP_TYPE unset), which runs no frr-k8s code.
func SpeakerArgs(ns, pod, node string, metricsPort, healthPort int) []string {
	return []string{
		"--namespace=" + ns, "--pod-name=" + pod, "--node-name=" + node,
		fmt.Sprintf("--port=%d", metricsPort), fmt.Sprintf("--health-probe-port=%d", healthPort),
		"--log-level=info",
	}
}

// SpeakerPod is the Pod object the speaker process on node stands for, like OwnPod: the
// speaker reads it at start. It is bound to no node (a node name that no Node has), so that no
// kubelet tries to run it.
func SpeakerPod(ns, node string) *corev1.Pod {
	p := OwnPod(ns, "metallb-speaker-"+node)
	p.Labels["component"] = "speaker"
	p.Spec.Containers[0].Name, p.Spec.Containers[0].Image = "speaker", "metallb-speaker:"+Version
	return p
}

// OwnPod is the Pod object MetalLB's controller process stands for: it is never scheduled (the
// process runs outside the cluster) and exists only because the controller reads its own Pod
// at start.
func OwnPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "metallb", "component": "controller"}},
		Spec: corev1.PodSpec{
			NodeName:   "metallb-runs-outside-the-cluster",
			Containers: []corev1.Container{{Name: "controller", Image: "metallb-controller:" + Version}},
		},
	}
}
