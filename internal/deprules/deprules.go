package deprules

import (
	"fmt"
	"slices"
	"strings"
)

// Module is Portico's module path.
const Module = "github.com/portico-lb/portico"

// Rule constrains what one package links (its transitive imports, as `go list -deps` prints
// them).
type Rule struct {
	// Package is the package the rule is about, as `go list` takes it (e.g. ./cmd/portico-agent).
	Package string
	// Why says what the rule protects, for the failure message.
	Why string
	// Forbidden are import paths the package must not link: each path and everything under it.
	Forbidden []string
	// OnlyPortico, when not nil, lists the only Portico packages (paths relative to Module,
	// each with everything under it) the package may link besides itself.
	OnlyPortico []string
}

// Rules are the house's dependency rules.
var Rules = []Rule{
	{
		Package: "./cmd/portico-agent",
		Why:     "the agent is a dataplane: it runs no provider and no controller",
		Forbidden: []string{
			"github.com/aws/aws-sdk-go-v2",
			Module + "/providers/aws",
			Module + "/providers/baremetal",
			Module + "/providers/reference",
			Module + "/providers/registry",
			Module + "/controllers",
			"sigs.k8s.io/controller-runtime/pkg/client",
		},
	},
	{
		Package:   "./cmd/portico-controller",
		Why:       "the controller runs no dataplane and no announcer",
		Forbidden: agentOnly,
	},
	{
		Package:   "./cmd/portico-ccm",
		Why:       "the cloud-controller-manager runs no dataplane and no announcer",
		Forbidden: agentOnly,
	},
	{
		Package:     "./config",
		Why:         "config is a leaf: each binary's cmd wires its registry and plug-ins",
		OnlyPortico: []string{"internal/version", "api", "servicerules", "addresspool", "annotations"},
	},
	{
		Package:     "./servicerules",
		Why:         "the ground floor imports none of the binaries' rooms",
		OnlyPortico: []string{"annotations"},
	},
	{
		Package:     "./addresspool",
		Why:         "the ground floor imports none of the binaries' rooms",
		OnlyPortico: []string{"api"},
	},
}

// agentOnly are the libraries only portico-agent runs.
var agentOnly = []string{
	"github.com/hashicorp/memberlist",
	"github.com/osrg/gobgp",
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	"github.com/mdlayher/arp",
	"github.com/mdlayher/ndp",
	Module + "/nodeproxy",
}

// Check returns every dependency in deps (import paths, one per package linked, the package
// itself among them) that breaks r, each with the reason.
func Check(r Rule, self string, deps []string) []string {
	var out []string
	for _, d := range deps {
		if d == self {
			continue
		}
		if i := slices.IndexFunc(r.Forbidden, func(f string) bool { return under(d, f) }); i >= 0 {
			out = append(out, fmt.Sprintf("%s links %s (forbidden: %s): %s", r.Package, d, r.Forbidden[i], r.Why))
			continue
		}
		if r.OnlyPortico != nil && under(d, Module) && !slices.ContainsFunc(r.OnlyPortico, func(a string) bool { return under(d, Module+"/"+a) }) {
			out = append(out, fmt.Sprintf("%s links %s (allowed Portico packages: %v): %s", r.Package, d, r.OnlyPortico, r.Why))
		}
	}
	return out
}

// under reports whether path is prefix or a package below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
