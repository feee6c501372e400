package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/portico-lb/portico/providers/reference"
	"github.com/portico-lb/portico/providers/registry"
)

func parse(t *testing.T, args ...string) (Controller[registry.Configs], error) {
	t.Helper()
	c := DefaultController(registry.NewConfigs())
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.Complete(fs); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestControllerFlags(t *testing.T) {
	c, err := parse(t, "--class=portico-lb.io/a=reference, portico-lb.io/b=reference", "--resync-period=0", "--workers=2", "--ignore-exclude-lb")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Classes) != 2 || c.Classes["portico-lb.io/b"] != "reference" || c.ResyncPeriod.Duration != 0 || c.Workers != 2 || !c.IgnoreExcludeLB {
		t.Errorf("config = %+v", c)
	}
}

func TestControllerValidateListsEveryError(t *testing.T) {
	_, err := parse(t, "--class=Not A Class=nosuch", "--workers=0", "--reference-pool=nope", "--metrics-bind-address=8080",
		"--leader-election-lease-duration=1s", "--leader-election-renew-deadline=2s")
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"config.classes[Not A Class]", "Unsupported value: \"nosuch\"", "config.workers", "config.providers.reference.pool", "config.metricsBindAddress", "config.leaderElectionLease"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := parse(t); err == nil || !strings.Contains(err.Error(), "config.classes") {
		t.Errorf("a controller owning nothing must be rejected, got %v", err)
	}
	if _, err := parse(t, "--class=nopair"); err == nil || !strings.Contains(err.Error(), "CLASS=PROVIDER") {
		t.Errorf("malformed --class: %v", err)
	}
}

func TestControllerConfigFileUnderFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("classes:\n  portico-lb.io/x: reference\nworkers: 7\nresyncPeriod: 1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parse(t, "--config="+path, "--workers=3")
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 3 || c.ResyncPeriod.Duration != time.Minute || c.Classes["portico-lb.io/x"] != "reference" {
		t.Errorf("config = %+v", c)
	}
	if err := os.WriteFile(path, []byte("workerz: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(t, "--config="+path); err == nil || !strings.Contains(err.Error(), "workerz") {
		t.Errorf("unknown file key must be an error, got %v", err)
	}
}

func TestControllerFlagErrorsReadWell(t *testing.T) {
	_, err := parse(t, "--class=portico-lb.io/x=reference", "--resync-period=-1s")
	if err == nil || !strings.Contains(err.Error(), `config.resyncPeriod: Invalid value: "-1s"`) {
		t.Errorf("negative resync period: %v", err)
	}
	if _, err := parse(t, "--class=x=aws,x=reference"); err == nil || !strings.Contains(err.Error(), `class "x" is given twice`) {
		t.Errorf("duplicate class: %v", err)
	}
	cli := NewCLI("portico-controller")
	c := DefaultController(registry.NewConfigs())
	c.BindFlags(cli.Flags())
	if err := cli.Parse([]string{"--workers=2", "stray"}); err == nil || !strings.Contains(err.Error(), `unexpected argument "stray"`) {
		t.Errorf("positional argument: %v", err)
	}
	if u := cli.Flags().Lookup("v").Usage; strings.Contains(u, "testing") {
		t.Errorf("-v usage = %q", u)
	}
}

func TestControllerConfigFileProviders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("classes:\n  portico-lb.io/x: reference\nproviders:\n  reference:\n    pool: 198.18.9.0/24\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parse(t, "--config="+path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers["reference"].(*reference.Config).Pool; got != "198.18.9.0/24" {
		t.Errorf("pool from file = %q", got)
	}
	c, err = parse(t, "--config="+path, "--reference-pool=198.18.10.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers["reference"].(*reference.Config).Pool; got != "198.18.10.0/24" {
		t.Errorf("flag must win over the file: pool = %q", got)
	}
}

func TestNoKubeconfigNamesTheFlag(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := restConfig("", "")
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
		t.Errorf("err = %v", err)
	}
}

func TestMasterKeepsInClusterCredentials(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	const master = "https://198.18.0.1:6443"
	inCluster := func() (*rest.Config, error) {
		return &rest.Config{Host: "https://10.96.0.1:443", BearerTokenFile: "/var/run/secrets/token",
			TLSClientConfig: rest.TLSClientConfig{CAFile: "/var/run/secrets/ca.crt"}}, nil
	}
	cfg, err := restConfigFrom("", master, inCluster)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != master || cfg.BearerTokenFile != "/var/run/secrets/token" || cfg.CAFile != "/var/run/secrets/ca.crt" {
		t.Errorf("in a pod, --master must keep the service account's credentials: host %q, token %q, CA %q",
			cfg.Host, cfg.BearerTokenFile, cfg.CAFile)
	}

	// Outside a pod --master alone is an address with no credentials, as before.
	cfg, err = restConfigFrom("", master, func() (*rest.Config, error) { return nil, rest.ErrNotInCluster })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != master || cfg.BearerTokenFile != "" {
		t.Errorf("outside a pod: host %q, token %q", cfg.Host, cfg.BearerTokenFile)
	}

	// A kubeconfig file wins over the service account: only its server is overridden.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://198.18.0.2:6443"}}]
users: [{name: u, user: {token: from-file}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = restConfigFrom(kc, master, inCluster)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != master || cfg.BearerToken != "from-file" || cfg.BearerTokenFile != "" {
		t.Errorf("with a kubeconfig: host %q, token %q, token file %q", cfg.Host, cfg.BearerToken, cfg.BearerTokenFile)
	}
}
