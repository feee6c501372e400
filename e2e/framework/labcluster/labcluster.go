// Package labcluster is the fixture of the suites that run Portico on a network lab: a netlab lab
// with a link to this namespace, a real control plane (e2e/framework/cluster) listening on that
// link, optionally Portico's CRDs and namespaces, the lab nodes registered as Nodes (both
// families, their pod CIDRs), the portico-agent binary for the suite to start in the node
// namespaces and, optionally, portico-controller sending every class-less Service to the
// baremetal provider. Start is the bare-metal suites' shape (e2e/suites/l2, e2e/suites/bgp: three
// dual-stack nodes, one client, the controller); New takes Options (e2e/suites/dataplane: four
// nodes, two clients, a router, no controller). Each suite adds its pools, routes and agents.
package labcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

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
	CL         client.Client    // with the v1alpha1 scheme
	Controller *process.Process // portico-controller (Options.Controller), logging to Dir/controller.log
}

// Options shape an Env.
type Options struct {
	Prefix     string         // of Dir's name
	Lab        netlab.Options // RootLink is always set
	CRDDir     string         // CRDs to install; "": none
	Namespaces []string       // to create
	Controller bool           // run portico-controller with --classless-provider=baremetal
}

// Start is New with the bare-metal suites' options: a dual-stack lab of three nodes and one
// client, the CRDs in crdDir, namespaces, and portico-controller.
func Start(ctx context.Context, prefix, crdDir string, namespaces ...string) (*Env, error) {
	return New(ctx, Options{Prefix: prefix, Lab: netlab.Options{Nodes: 3, Clients: 1, IPv6: true},
		CRDDir: crdDir, Namespaces: namespaces, Controller: true})
}

// New builds (or finds in the cache) the binaries, starts the lab and the control plane,
// installs the CRDs, creates the namespaces, registers the lab nodes and starts
// portico-controller if asked. On an error the returned Env holds what was started, for Close.
func New(ctx context.Context, opts Options) (*Env, error) {
	e := &Env{}
	return e, e.start(ctx, opts)
}

func (e *Env) start(ctx context.Context, opts Options) error {
	var err error
	if e.Dir, err = cluster.OwnedTempDir(opts.Prefix); err != nil {
		return err
	}
	if e.Agent, err = gobuild.Binary(ctx, "cmd/portico-agent"); err != nil {
		return err
	}
	opts.Lab.RootLink = true
	if e.Lab, err = netlab.NewE(opts.Lab); err != nil {
		return err
	}
	copts := cluster.Options{BindAddress: e.Lab.RootAddr(), ServiceCIDRs: []string{cluster.ServiceCIDR}}
	if opts.Lab.IPv6 {
		copts.ServiceCIDRs = append(copts.ServiceCIDRs, cluster.ServiceCIDR6)
	}
	if e.Cluster, err = cluster.Start(ctx, copts); err != nil {
		return err
	}
	if opts.CRDDir != "" {
		if err := e.Cluster.InstallCRDs(ctx, opts.CRDDir); err != nil {
			return err
		}
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
	for _, ns := range opts.Namespaces {
		if err := e.Cluster.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, n := range e.Lab.Nodes() {
		spec := cluster.NodeSpec{Name: n.Name, InternalIPs: []netip.Addr{n.Addr}, PodCIDRs: []netip.Prefix{n.PodCIDR}}
		if opts.Lab.IPv6 {
			spec.InternalIPs, spec.PodCIDRs = append(spec.InternalIPs, n.Addr6), append(spec.PodCIDRs, n.PodCIDR6)
		}
		if _, err := e.Cluster.RegisterNode(ctx, spec); err != nil {
			return err
		}
	}
	if !opts.Controller {
		return nil
	}
	controller, err := gobuild.Binary(ctx, "cmd/portico-controller")
	if err != nil {
		return err
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
	if e.Dir != "" {
		os.RemoveAll(e.Dir)
	}
	return errors.Join(errs...)
}
