package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
)

// ServiceCIDR is the ClusterIP range of every test cluster. LoadBalancer pools used by tests
// take their addresses from LBPoolCIDR, which does not overlap it.
//
// ServiceCIDR6 is the IPv6 ClusterIP range of a dual-stack cluster (Options.ServiceCIDRs), and
// LBPoolCIDR6 the IPv6 addresses tests use as load-balancer or external IPs. Both lie in
// fd00:c613:ff00::/40, inside the network labs' fd00:c613::/32 but outside every lab slot's
// fd00:c613:N::/48 (N = 0..15; see e2e/framework/netlab).
const (
	ServiceCIDR  = "198.18.0.0/17"
	LBPoolCIDR   = "198.18.128.0/17"
	ServiceCIDR6 = "fd00:c613:ff00::/112"
	LBPoolCIDR6  = "fd00:c613:ff01::/112"
)

// DefaultControllers are the kube-controller-manager controllers a test cluster runs: real
// EndpointSlices from Pods, default ServiceAccounts for new namespaces, namespace deletion.
var DefaultControllers = []string{"endpointslice", "endpointslicemirroring", "serviceaccount", "namespace"}

// Options configure a cluster.
type Options struct {
	// BindAddress is where kube-apiserver listens. Zero means 127.0.0.1. Pass a network lab's
	// root address so that node namespaces can reach it.
	BindAddress netip.Addr
	// Controllers for kube-controller-manager; nil means DefaultControllers, empty (non-nil)
	// means kube-controller-manager is not started.
	Controllers []string
	// Dir holds data and logs; empty means a fresh temporary directory removed by Stop.
	Dir string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// Binaries overrides the binaries (otherwise k8sbin.Ensure builds or finds them).
	Binaries *k8sbin.Binaries
	// ServiceCIDRs are the ClusterIP ranges, at most one per family, the first being the
	// default family of new Services; nil means ServiceCIDR only. []string{ServiceCIDR,
	// ServiceCIDR6} makes a dual-stack cluster.
	ServiceCIDRs []string
	// Tokens are bearer tokens the apiserver accepts besides the admin's, e.g. one per kubelet
	// (user system:node:NAME in group system:nodes).
	Tokens []Token
	// APIServerArgs are extra kube-apiserver flags, appended after the defaults.
	APIServerArgs []string
	// NodeAuthorizer authorizes with Node,RBAC and admits with NodeRestriction, as a cluster
	// with real kubelets runs (the default is RBAC alone).
	NodeAuthorizer bool
	// Scheduler also starts kube-scheduler.
	Scheduler bool
}

// Token is one line of the apiserver's token file.
type Token struct {
	Token  string
	User   string
	Groups []string
}

// Cluster is a running etcd + kube-apiserver (+ kube-controller-manager).
type Cluster struct {
	dir       string
	ownsDir   bool
	creds     *credentials
	host      string
	procs     []*process.Process
	cfg       *rest.Config
	client    kubernetes.Interface
	kubeconfg string
	logf      func(string, ...any)
}

// StartForTest starts a cluster and stops it when t ends; it fails t on error.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return c
}

// Start builds (if needed) and starts the control plane, and waits until it is ready.
// On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if !opts.BindAddress.IsValid() {
		opts.BindAddress = netip.MustParseAddr("127.0.0.1")
	}
	if opts.Controllers == nil {
		opts.Controllers = DefaultControllers
	}
	bins := opts.Binaries
	if bins == nil {
		b, err := k8sbin.Ensure(ctx, k8sbin.Options{Log: opts.Logf})
		if err != nil {
			return nil, fmt.Errorf("building control-plane binaries: %w", err)
		}
		bins = &b
	}
	c = &Cluster{dir: opts.Dir, logf: opts.Logf}
	if c.dir == "" {
		if c.dir, err = OwnedTempDir(dirPrefix); err != nil {
			return nil, err
		}
		c.ownsDir = true
	}
	// The error returns below set c to nil before this runs: stop what was started through a
	// copy.
	started := c
	defer func() {
		if err != nil {
			_ = started.Stop()
		}
	}()

	serviceCIDRs := opts.ServiceCIDRs
	if len(serviceCIDRs) == 0 {
		serviceCIDRs = []string{ServiceCIDR}
	}
	hosts := []net.IP{net.ParseIP("127.0.0.1"), opts.BindAddress.AsSlice()}
	// The kubernetes Service's ClusterIP (the first address of each Service CIDR), as a real
	// apiserver's certificate has it: pods reach the API server there once a service proxy
	// programs it (e2e/framework/nodes).
	for _, cidr := range serviceCIDRs {
		if p, perr := netip.ParsePrefix(cidr); perr == nil {
			hosts = append(hosts, p.Masked().Addr().Next().AsSlice())
		}
	}
	if c.creds, err = writeCredentials(c.dir, hosts, opts.Tokens); err != nil {
		return nil, fmt.Errorf("writing credentials: %w", err)
	}
	etcdURL, err := c.startEtcd(ctx, bins.Etcd)
	if err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, bins.KubeAPIServer, etcdURL, opts, serviceCIDRs); err != nil {
		return nil, err
	}
	if len(opts.Controllers) > 0 {
		if err := c.startControllerManager(ctx, bins.KubeControllerManager, opts.Controllers); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if _, err := c.start("kube-scheduler", bins.KubeScheduler,
			"--kubeconfig="+c.kubeconfg, "--leader-elect=false", "--secure-port=0", "--v=0"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) startEtcd(ctx context.Context, bin string) (string, error) {
	free, err := ports.FreeOn(ports.Loopback, 2)
	if err != nil {
		return "", err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(free[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(free[1])
	p, err := c.start("etcd", bin,
		"--name=default",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	err = waitFor(ctx, p, 60*time.Second, func() error {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd health: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for etcd: %w", err)
	}
	return client, nil
}

func (c *Cluster) startAPIServer(ctx context.Context, bin, etcdURL string, opts Options, serviceCIDRs []string) error {
	bind := opts.BindAddress
	authz := []string{"--authorization-mode=RBAC"}
	if opts.NodeAuthorizer {
		authz = []string{"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"}
	}
	free, err := ports.FreeOn(bind, 1)
	if err != nil {
		return err
	}
	c.host = "https://" + netip.AddrPortFrom(bind, uint16(free[0])).String()
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + bind.String(),
		"--advertise-address=" + bind.String(),
		"--secure-port=" + strconv.Itoa(free[0]),
		"--tls-cert-file=" + c.creds.certFile,
		"--tls-private-key-file=" + c.creds.keyFile,
		"--token-auth-file=" + c.creds.tokenFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.creds.saPubFile,
		"--service-account-signing-key-file=" + c.creds.saKeyFile,
		"--service-cluster-ip-range=" + strings.Join(serviceCIDRs, ","),
		"--service-node-port-range=30000-32767",
		"--cert-dir=" + filepath.Join(c.dir, "apiserver-certs"),
		"--enable-priority-and-fairness=false",
		"--v=0",
	}
	args = append(append(args, authz...), opts.APIServerArgs...)
	p, err := c.start("kube-apiserver", bin, args...)
	if err != nil {
		return err
	}
	c.cfg = &rest.Config{
		Host:            c.host,
		BearerToken:     c.creds.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.creds.caPEM},
		QPS:             1000,
		Burst:           2000,
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.creds.caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	err = waitFor(ctx, p, 120*time.Second, func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.creds.adminToken)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver: %w", err)
	}
	if c.client, err = kubernetes.NewForConfig(c.cfg); err != nil {
		return err
	}
	c.kubeconfg = filepath.Join(c.dir, "kubeconfig")
	if err := c.WriteKubeconfig(c.kubeconfg, c.host); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context, bin string, controllers []string) error {
	_, err := c.start("kube-controller-manager", bin,
		"--kubeconfig="+c.kubeconfg,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+c.creds.saKeyFile,
		"--root-ca-file="+filepath.Join(c.dir, "ca.crt"),
		"--concurrent-service-endpoint-syncs=10",
		"--v=0",
	)
	return err
}

// Config returns a copy of the admin rest.Config.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.cfg) }

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// KubeconfigPath is an admin kubeconfig file pointing at the apiserver's bind address.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfg }

// Host is the apiserver URL.
func (c *Cluster) Host() string { return c.host }

// PIDs maps each running control-plane process name to its pid.
func (c *Cluster) PIDs() map[string]int {
	m := map[string]int{}
	for _, p := range c.procs {
		m[p.Name()] = p.Pid()
	}
	return m
}

// Dir holds the cluster's data and process logs.
func (c *Cluster) Dir() string { return c.dir }

// WriteKubeconfig writes an admin kubeconfig for server (e.g. the apiserver's URL as seen from
// inside a network namespace) to path.
func (c *Cluster) WriteKubeconfig(path, server string) error {
	return c.WriteKubeconfigWithToken(path, server, c.creds.adminToken)
}

// WriteKubeconfigWithToken writes a kubeconfig for server that authenticates with a bearer
// token, e.g. a ServiceAccount's.
func (c *Cluster) WriteKubeconfigWithToken(path, server, token string) error {
	if err := os.WriteFile(filepath.Join(c.dir, "ca.crt"), c.creds.caPEM, 0o600); err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["portico-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.creds.caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["portico-test"] = &clientcmdapi.Context{Cluster: "portico-test", AuthInfo: "user"}
	cfg.CurrentContext = "portico-test"
	return clientcmd.WriteToFile(*cfg, path)
}

// Stop terminates every process (SIGTERM, then SIGKILL after a grace period), waits for them
// and removes the directory if Start created it. It is safe to call twice.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	c.procs = nil
	if c.ownsDir && c.dir != "" {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, err)
		}
		c.dir = ""
	}
	return errors.Join(errs...)
}

// dirPrefix names cluster directories; the owner's pid follows it so that directories of runs
// that died (a panic, an interrupt) can be swept (their processes died with the owner through
// Pdeathsig; only the data is left).
const dirPrefix = "portico-cluster-"

// OwnedTempDir creates a temporary directory named prefix, this process's pid and a random
// suffix, after removing the directories of that prefix whose owning process is gone (a test
// binary killed at its timeout or interrupted never runs its cleanup).
func OwnedTempDir(prefix string) (string, error) {
	sweepOwned(prefix)
	return os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
}

// sweepOwned removes $TMPDIR/<prefix><pid>-* for pids that no longer exist.
func sweepOwned(prefix string) {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, dir := range matches {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), prefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}
