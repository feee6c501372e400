package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Skipped is one entry of the skip list: specs matching Pattern (a regular expression over the
// spec's full text, as ginkgo --skip takes it) are not run, for Reason. docs/conformance.md
// lists every entry (TestSkipListDocumented). Nothing is skipped because Portico fails it.
type Skipped struct {
	Pattern string
	Reason  string
	// IPv6 limits the entry to the IPv6 columns (Column.IPv6).
	IPv6 bool
}

// SkipList is the skip list of every selection.
var SkipList = []Skipped{
	{Pattern: `\[Disruptive\]`, Reason: "restarts a cluster component while other specs run on parallel ginkgo processes: " +
		"\"should work after restarting kube-proxy\" deletes the kube-system pods labelled k8s-app=kube-proxy, " +
		"\"should work after restarting apiserver\" needs the apiserver as a deletable pod (here it is a process); " +
		"the agent's restart is proven by e2e/suites/dataplane"},
	{Pattern: `\[Feature:SCTPConnectivity\]`, Reason: "needs SCTP sockets in pods, which this machine's kernel does not offer (no /proc/sys/net/sctp): in the IPv6 column's run the netserver pods of \"Granular Checks: Services Secondary IP Family ... pod-Service: sctp\" (agnhost netexec --sctp-port=8082) restarted with back-off and never became Ready, before any Service traffic; cloud-provider-kind's CI skips these specs too. The only such spec in the selections is that dual-stack one"},
	{Pattern: `\[sig-network\] LoadBalancers ExternalTrafficPolicy: Local \[Feature:LoadBalancer\] \[Slow\] should work from pods`, IPv6: true,
		Reason: "cannot pass over IPv6 for any service proxy: the spec takes the client address from agnhost's " +
			"/clientip reply \"[ADDR]:PORT\" as the text before the first colon (strings.Split(stdout, \":\")[0], " +
			"loadbalancer.go:1280 in v1.36.3), \"[fd00\" for an IPv6 client, and compares it with the pod's IP " +
			"until the 10-minute propagation timeout; in Portico's IPv6 run the replies named the pod's own IPv6 " +
			"address (source kept). It runs in the IPv4 columns"},
}

// Selection is a set of upstream specs to run.
type Selection struct {
	// Name says what it is, for logs.
	Name string
	// Focus is ginkgo's --focus.
	Focus string
	// LoadBalancers is the focus on the selection's LoadBalancers specs alone (for a column
	// with LoadBalancersOnly).
	LoadBalancers string
	// Timeout bounds a column's run.
	Timeout time.Duration
	// Exact runs Focus alone in the IPv6 columns too (no DualStackFocus added): a re-run of
	// named specs (Rerun).
	Exact bool
	// The pinned numbers of specs a column reports (run, or skipped while running) in an IPv4
	// column, an IPv4 LoadBalancers-only column, and the IPv6 ones; 0: not pinned. A run that
	// reports another number is incomplete (ColumnResult.Incomplete): specs never ran, or the
	// upstream selection changed and the pin is to be updated on purpose.
	Specs, LoadBalancerSpecs, SpecsIPv6, LoadBalancerSpecsIPv6 int
}

// Want is the number of specs the selection pins for col (0: not pinned).
func (s Selection) Want(col Column) int {
	switch {
	case col.IPv6 && col.LoadBalancersOnly:
		return s.LoadBalancerSpecsIPv6
	case col.IPv6:
		return s.SpecsIPv6
	case col.LoadBalancersOnly:
		return s.LoadBalancerSpecs
	}
	return s.Specs
}

// NotApplicable is a spec whose outcome in the layer-2 columns (Portico's agent announcing by
// ARP/NDP, one announcer per VIP) says nothing of the service proxy: the table shows it there
// as not applicable with its reason, neither as a pass nor as a failure.
type NotApplicable struct {
	Pattern string // a regular expression over the spec's full text
	Reason  string
}

// NotApplicableL2 are the specs not applicable in the layer-2 columns (docs/conformance.md).
var NotApplicableL2 = []NotApplicable{
	{Pattern: `LoadBalancers \[Feature:LoadBalancer\] should be able to switch session affinity for LoadBalancer service with Local traffic policy`,
		Reason: "L2 mode (one announcer per VIP): with affinity off and externalTrafficPolicy Local the spec wants answers from pods on two nodes, " +
			"which only the announcer's own pods give; it passed only when the VIP moved during the spec, and failed after 600 s on another cluster"},
}

// notApplicableL2 are NotApplicableL2's patterns, compiled once.
var notApplicableL2 = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, n := range NotApplicableL2 {
		out = append(out, regexp.MustCompile(n.Pattern))
	}
	return out
}()

// NotApplicable returns the reason spec name is not applicable in col, if it is not: in the
// columns whose VIPs Portico announces by L2 (Portico's, and kube-proxy's with Portico's L2
// announcer).
func (c Column) NotApplicable(name string) (string, bool) {
	if c.BGP || (c.KubeProxy != "" && !c.Announcer) {
		return "", false
	}
	for i, n := range NotApplicableL2 {
		if notApplicableL2[i].MatchString(name) {
			return n.Reason, true
		}
	}
	return "", false
}

// Rerun is the selection of the specs of an earlier run that neither passed nor were skipped
// while running (ginkgo's --focus on each one's full text), for a second run on a fresh
// cluster; ok is false when there is none. MergeRerun puts the outcomes in place.
func Rerun(earlier []Spec, timeout time.Duration) (sel Selection, ok bool) {
	var names []string
	for _, s := range earlier {
		if !s.Passed() && s.State != "skipped" {
			names = append(names, regexp.QuoteMeta(s.Name))
		}
	}
	if len(names) == 0 {
		return Selection{}, false
	}
	focus := "(" + strings.Join(names, ")|(") + ")"
	n := len(names)
	return Selection{Name: fmt.Sprintf("the %d specs that failed in the earlier run", n), Focus: focus, LoadBalancers: focus, Timeout: timeout, Exact: true,
		Specs: n, LoadBalancerSpecs: n, SpecsIPv6: n, LoadBalancerSpecsIPv6: n}, true
}

// MergeRerun returns the specs of an earlier run with those of a re-run of some of them
// (Rerun) in their place, each re-run spec keeping the earlier outcome in Earlier.
func MergeRerun(earlier, again []Spec) []Spec {
	merged := slices.Clone(earlier)
	for _, a := range again {
		i := slices.IndexFunc(merged, func(s Spec) bool { return s.Name == a.Name })
		if i < 0 {
			merged = append(merged, a)
			continue
		}
		first := merged[i]
		a.Earlier = &first
		merged[i] = a
	}
	return merged
}

// Skip is ginkgo's --skip for an IPv4 column, SkipFor(true) for an IPv6 one: the patterns of
// SkipList that apply.
func (s Selection) Skip() string { return s.SkipFor(false) }

// SkipFor is ginkgo's --skip: every pattern of SkipList, those marked IPv6 only with ipv6.
func (s Selection) SkipFor(ipv6 bool) string {
	var ps []string
	for _, e := range SkipList {
		if e.IPv6 && !ipv6 {
			continue
		}
		ps = append(ps, "("+e.Pattern+")")
	}
	return strings.Join(ps, "|")
}

// The selections: Full is what `make conformance` runs, Fast the subset in `make test`.
var (
	Full = Selection{
		Name:          "[sig-network] Services and LoadBalancers specs",
		Focus:         `\[sig-network\] (Services|LoadBalancers) `,
		LoadBalancers: `\[sig-network\] LoadBalancers `,
		Timeout:       3 * time.Hour,
		// 49 Services and 17 LoadBalancers specs after the skip list; over IPv6, with
		// upstream's dual-stack specs, 87 (16 LoadBalancers: one is skipped for IPv6).
		Specs: 66, LoadBalancerSpecs: 17, SpecsIPv6: 87, LoadBalancerSpecsIPv6: 16,
	}
	// Fast leaves out the [Slow] LoadBalancers specs but those of the source-IP group
	// (ExternalTrafficPolicy: Local), which the Service's own traffic decides.
	Fast = Selection{
		Name:          "Conformance Services specs and the LoadBalancers specs not [Slow] or ExternalTrafficPolicy: Local",
		Focus:         `\[sig-network\] (Services .*\[Conformance\]|LoadBalancers (ExternalTrafficPolicy: Local|\[Feature:LoadBalancer\] should be able to preserve UDP traffic))`,
		LoadBalancers: `\[sig-network\] LoadBalancers (ExternalTrafficPolicy: Local|\[Feature:LoadBalancer\] should be able to preserve UDP traffic)`,
		Timeout:       30 * time.Minute,
		// 15 [Conformance] Services specs, 2 LoadBalancers specs (UDP) and 4 of
		// ExternalTrafficPolicy: Local. The other columns' numbers are not pinned.
		Specs: 21,
	}
)

// DualStackFocus selects upstream's dual-stack specs (test/e2e/network/dual_stack.go), which
// every selection runs in the IPv6 columns besides its own: the cluster there is dual-stack,
// and they check both families (Services of either family and both, pods and nodes with two
// addresses, traffic to each family's ClusterIP, NodePort and endpoints).
const DualStackFocus = `\[sig-network\] \[Feature:IPv6DualStack\] `

// check compiles the patterns (for tests).
func (s Selection) check() error {
	for _, p := range []string{s.Focus, s.LoadBalancers, s.Skip(), s.SkipFor(true), "(" + s.Focus + ")|(" + DualStackFocus + ")"} {
		if _, err := regexp.Compile(p); err != nil {
			return err
		}
	}
	return nil
}
