// Package labcluster starts what the bare-metal end-to-end suites (e2e/l2agent, e2e/bgp) share: the
// portico-agent and portico-controller binaries, a dual-stack network lab of three nodes and one
// client with a link to this namespace, the control plane with Portico's CRDs, the lab nodes
// registered as Nodes, and portico-controller sending every class-less Service to the baremetal
// provider. Each suite adds its pools, its router or on-link routes, and its agents.
package labcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/netlab"
	"github.com/portico-lb/portico/e2e/framework/process"
)

// Env is one started environment. Close stops whatever of it was started.
type Env struct {
	Dir        string // temporary: kubeconfig, logs
	Agent      string // the portico-agent binary (in the gobuild cache)
	Kubeconfig string // for processes inside the lab (the apiserver on the root link)
	Lab        *netlab.Lab
	Cluster    *cluster.Cluster
	CS         kubernetes.Interface
	CL         client.Client // with the v1alpha1 scheme
	Controller *process.Process // portico-controller, logging to Dir/controller.log

	mu   sync.Mutex
	logs map[string]*os.File
}

// Start builds the binaries into a new temporary directory named prefix*, starts the lab and
// the control plane with the CRDs in crdDir, creates namespaces, registers the lab nodes and
// starts portico-controller (its output in Log("controller.log")). On an error the returned Env
// holds what was started, for Close.
func Start(ctx context.Context, prefix, crdDir string, namespaces ...string) (*Env, error) {
	e := &Env{logs: map[string]*os.File{}}
	return e, e.start(ctx, prefix, crdDir, namespaces)
}

func (e *Env) start(ctx context.Context, prefix, crdDir string, namespaces []string) error {
	var err error
	if e.Dir, err = cluster.OwnedTempDir(prefix); err != nil {
		return err
	}
	if e.Agent, err = gobuild.Binary(ctx, "cmd/portico-agent"); err != nil {
		return err
	}
	controller, err := gobuild.Binary(ctx, "cmd/portico-controller")
	if err != nil {
		return err
	}
	if e.Lab, err = netlab.NewE(netlab.Options{Nodes: 3, Clients: 1, RootLink: true, IPv6: true}); err != nil {
		return err
	}
	opts := cluster.Options{BindAddress: e.Lab.RootAddr(), ServiceCIDRs: []string{cluster.ServiceCIDR, cluster.ServiceCIDR6}}
	if e.Cluster, err = cluster.Start(ctx, opts); err != nil {
		return err
	}
	if err := e.Cluster.InstallCRDs(ctx, crdDir); err != nil {
		return err
	}
	e.CS = e.Cluster.Client()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if e.CL, err = client.New(e.Cluster.Config(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	if err := e.Cluster.WriteKubeconfig(e.Kubeconfig, e.Cluster.Host()); err != nil {
		return err
	}
	for _, ns := range namespaces {
		if err := e.Cluster.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, n := range e.Lab.Nodes() {
		spec := cluster.NodeSpec{Name: n.Name, InternalIPs: []netip.Addr{n.Addr, n.Addr6}, PodCIDRs: []netip.Prefix{n.PodCIDR, n.PodCIDR6}}
		if _, err := e.Cluster.RegisterNode(ctx, spec); err != nil {
			return err
		}
	}
	// The controller: the real binary, all class-less Services to the baremetal provider.
	e.Controller, err = process.Start(controller, process.Options{
		Name: "portico-controller",
		Args: []string{"--kubeconfig=" + e.Cluster.KubeconfigPath(), "--classless-provider=baremetal",
			"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"},
		LogPath: filepath.Join(e.Dir, "controller.log"),
	})
	return err
}

// Log is the file name in Dir, created on first use and shared by later calls; nil (output
// discarded) when it cannot be created.
func (e *Env) Log(name string) *os.File {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.logs[name]; f != nil {
		return f
	}
	f, err := os.Create(filepath.Join(e.Dir, name))
	if err != nil {
		return nil
	}
	e.logs[name] = f
	return f
}

// Close stops the controller, the control plane and the lab and removes Dir. The suite stops
// its own processes (agents, routers) first.
func (e *Env) Close() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.Controller != nil {
		if err := e.Controller.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Cluster != nil {
		if err := e.Cluster.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping control plane: %w", err))
		}
	}
	if e.Lab != nil {
		if err := e.Lab.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing lab: %w", err))
		}
	}
	e.mu.Lock()
	for _, f := range e.logs {
		f.Close()
	}
	e.mu.Unlock()
	if e.Dir != "" {
		os.RemoveAll(e.Dir)
	}
	return errors.Join(errs...)
}
