package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) (Controller, error) {
	t.Helper()
	c := DefaultController()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
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
	c, err := parse(t, "--class=portico-lb.io/a=reference, portico-lb.io/b=reference", "--resync-period=0", "--workers=2")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Classes) != 2 || c.Classes["portico-lb.io/b"] != "reference" || c.ResyncPeriod.Duration != 0 || c.Workers != 2 {
		t.Errorf("config = %+v", c)
	}
}

func TestControllerValidateListsEveryError(t *testing.T) {
	_, err := parse(t, "--class=Not A Class=aws", "--workers=0", "--reference-pool=nope", "--metrics-bind-address=8080",
		"--leader-election-lease-duration=1s", "--leader-election-renew-deadline=2s")
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"config.classes[Not A Class]", "Unsupported value: \"aws\"", "config.workers", "config.referencePool", "config.metricsBindAddress", "config.leaderElectionLease"} {
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
