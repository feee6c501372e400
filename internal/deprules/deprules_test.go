package deprules

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyRules checks every rule against what `go list -deps` says the package links.
func TestDependencyRules(t *testing.T) {
	for _, r := range Rules {
		t.Run(strings.TrimPrefix(r.Package, "./"), func(t *testing.T) {
			self := Module + strings.TrimPrefix(r.Package, ".")
			out, err := exec.Command("go", "list", "-deps", self).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", r.Package, stderr(err))
			}
			deps := strings.Fields(string(out))
			if len(deps) < 2 {
				t.Fatalf("go list -deps %s listed %d packages; want its dependencies", r.Package, len(deps))
			}
			for _, v := range Check(r, self, deps) {
				t.Error(v)
			}
		})
	}
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return err.Error() + ": " + string(ee.Stderr)
	}
	return err.Error()
}

// TestCheckFindsViolations: Check fails on synthetic dependency lists that break each kind of
// rule, and only on those.
func TestCheckFindsViolations(t *testing.T) {
	agent := Rules[0]
	self := Module + "/cmd/portico-agent"
	clean := []string{"fmt", self, Module + "/nodeproxy", Module + "/servicerules", "github.com/osrg/gobgp/v4/pkg/server",
		Module + "/providers/awsome", "sigs.k8s.io/controller-runtime/pkg/clientx"}
	if v := Check(agent, self, clean); len(v) != 0 {
		t.Errorf("clean agent deps reported: %v", v)
	}
	dirty := append(clean, "github.com/aws/aws-sdk-go-v2/service/ec2", Module+"/providers/aws", Module+"/controllers/servicemodel",
		"sigs.k8s.io/controller-runtime/pkg/client")
	if v := Check(agent, self, dirty); len(v) != 4 {
		t.Errorf("agent with aws-sdk, providers/aws, controllers and the controller-runtime client: %d violations, want 4: %v", len(v), v)
	}

	controller := Rules[1]
	if v := Check(controller, Module+"/cmd/portico-controller", []string{"github.com/hashicorp/memberlist", "github.com/vishvananda/netlink/nl"}); len(v) != 2 {
		t.Errorf("controller with memberlist and netlink: %v, want 2 violations", v)
	}

	config := Rules[3]
	if config.Package != "./config" {
		t.Fatalf("Rules[3] is %s, want ./config", config.Package)
	}
	deps := []string{Module + "/config", Module + "/internal/version", Module + "/api/v1alpha1", "k8s.io/api/core/v1"}
	if v := Check(config, Module+"/config", deps); len(v) != 0 {
		t.Errorf("config with api and internal/version reported: %v", v)
	}
	deps = append(deps, Module+"/providers/registry", Module+"/nodeproxy/membership", Module+"/internal/versionx")
	if v := Check(config, Module+"/config", deps); len(v) != 3 {
		t.Errorf("config with registry, membership and a look-alike path: %v, want 3 violations", v)
	}
}
