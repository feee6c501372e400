package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSkipListDocumented: docs/conformance.md names every pattern of the skip list with its
// reason, and every entry has a reason.
func TestSkipListDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, e := range SkipList {
		if strings.TrimSpace(e.Reason) == "" {
			t.Errorf("skip %q has no reason", e.Pattern)
		}
		if !strings.Contains(doc, "`"+e.Pattern+"`") || !strings.Contains(doc, e.Reason) {
			t.Errorf("docs/conformance.md lacks the skip `%s` with its reason %q", e.Pattern, e.Reason)
		}
	}
	for _, s := range []Selection{Full, Fast} {
		if err := s.check(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		// The IPv6-only entry skips its spec in the IPv6 columns only.
		spec := "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should work from pods"
		if regexp.MustCompile(s.Skip()).MatchString(spec) || !regexp.MustCompile(s.SkipFor(true)).MatchString(spec) {
			t.Errorf("%s: the IPv4 skip %q or the IPv6 skip %q is wrong for %q", s.Name, s.Skip(), s.SkipFor(true), spec)
		}
	}
}

// TestReadReport reads a ginkgo JSON report: specs that ran and specs skipped while running
// are listed, those the filters left out and setup nodes are not.
func TestReadReport(t *testing.T) {
	report := `[{"SuiteDescription":"Kubernetes e2e suite","SpecReports":[
 {"ContainerHierarchyTexts":null,"LeafNodeType":"SynchronizedBeforeSuite","LeafNodeText":"","State":"passed","RunTime":1000},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"should serve a basic endpoint from pods [Conformance]","State":"passed","RunTime":12500000000},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"should fail","State":"failed","RunTime":3000000000,"Failure":{"Message":"timed out","Location":{"FileName":"/x/service.go","LineNumber":42}}},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"needs a provider","State":"skipped","Failure":{"Message":"Only supported for providers [gce]"}},
 {"ContainerHierarchyTexts":["[sig-apps] Deployment"],"LeafNodeType":"It","LeafNodeText":"filtered","State":"skipped"}
]}]`
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 {
		t.Fatalf("specs = %+v, want 3", specs)
	}
	if s := specs[0]; s.Name != "[sig-network] Services should serve a basic endpoint from pods [Conformance]" || !s.Passed() || s.Time != 12500*time.Millisecond {
		t.Errorf("first spec = %+v", s)
	}
	if s := specs[1]; s.State != "failed" || s.Location != "service.go:42" || s.Message != "timed out" {
		t.Errorf("second spec = %+v", s)
	}
	table := Table([]ColumnResult{{Column: PorticoColumn, Specs: specs}, {Column: IPTablesColumn, Specs: specs[:1]}})
	for _, want := range []string{
		"| Services should serve a basic endpoint from pods [Conformance] | pass (13s) | pass (13s) |",
		"| Services should fail | **FAILED** at service.go:42: timed out | – |",
		"| Services needs a provider | skipped: Only supported for providers [gce] | – |",
		"- Portico: 1 passed, 1 failed, 1 skipped while running",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestWriteBetweenMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte("a\n"+BeginMarker+"\nold\n"+EndMarker+"\nb\n"+BeginMarker6+"\nold6\n"+EndMarker6+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteBetweenMarkers(path, false, "new\n"); err != nil {
		t.Fatal(err)
	}
	if err := WriteBetweenMarkers(path, true, "new6\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "a\n" + BeginMarker + "\nnew\n" + EndMarker + "\nb\n" + BeginMarker6 + "\nnew6\n" + EndMarker6 + "\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteBetweenMarkers(path, false, "x"); err == nil {
		t.Error("no error without markers")
	}
}

// TestColumns: every column is found by its short name, the IPv6 ones run on an IPv6-first
// cluster, and ByFamily splits results by family in order.
func TestColumns(t *testing.T) {
	var results []ColumnResult
	for _, c := range Columns {
		got, err := ColumnByName(c.Short)
		if err != nil || got != c {
			t.Errorf("ColumnByName(%q) = %+v, %v", c.Short, got, err)
		}
		if fams := c.Families(); (fams[0] == "IPv6") != c.IPv6 {
			t.Errorf("%s: families %v", c.Name, fams)
		}
		results = append(results, ColumnResult{Column: c})
	}
	v4, v6 := ByFamily(results)
	var names4, names6 []string
	for _, r := range v4 {
		names4 = append(names4, r.Column.Short)
	}
	for _, r := range v6 {
		names6 = append(names6, r.Column.Short)
	}
	if got := strings.Join(names4, ","); got != "portico,portico-bgp,iptables,nftables" {
		t.Errorf("IPv4 columns %s", got)
	}
	if got := strings.Join(names6, ","); got != "portico-ipv6,portico-bgp-ipv6,iptables-ipv6,nftables-ipv6" {
		t.Errorf("IPv6 columns %s", got)
	}
}

// TestRerun: the re-run selection names exactly the specs that failed (not those passed or
// skipped while running), its focus matches them and no other, and the merged outcome shows
// both runs in the table and the totals.
func TestRerun(t *testing.T) {
	earlier := []Spec{
		{Name: "[sig-network] Services should pass", State: "passed"},
		{Name: "[sig-network] Services should fail (once) [Slow]", State: "failed", Location: "service.go:1", Message: "context deadline exceeded"},
		{Name: "[sig-network] Services needs a provider", State: "skipped", Message: "Only supported for providers [gce]"},
		{Name: "[sig-network] Services should time out", State: "timedout", Message: "spec timeout"},
	}
	if _, ok := Rerun(earlier[:1], time.Hour); ok {
		t.Error("a re-run of a run without failures")
	}
	sel, ok := Rerun(earlier, time.Hour)
	if !ok || !sel.Exact || sel.Timeout != time.Hour || sel.Focus != sel.LoadBalancers {
		t.Fatalf("Rerun = %+v, %v", sel, ok)
	}
	focus := regexp.MustCompile(sel.Focus)
	for _, s := range earlier {
		if want := !s.Passed() && s.State != "skipped"; focus.MatchString(s.Name) != want {
			t.Errorf("focus %q matches %q: %v, want %v", sel.Focus, s.Name, !want, want)
		}
	}
	again := []Spec{
		{Name: earlier[1].Name, State: "passed", Time: 20 * time.Second},
		{Name: earlier[3].Name, State: "failed", Location: "service.go:2", Message: "still broken"},
	}
	merged := MergeRerun(earlier, again)
	if len(merged) != 4 || merged[1].Earlier == nil || merged[1].Earlier.State != "failed" || !merged[1].Passed() || merged[0].Earlier != nil {
		t.Fatalf("merged = %+v", merged)
	}
	if earlier[1].State != "failed" {
		t.Error("MergeRerun changed the earlier specs")
	}
	table := Table([]ColumnResult{{Column: PorticoColumn, Specs: merged, RerunTook: time.Minute}})
	for _, want := range []string{
		"| Services should fail (once) [Slow] | pass (20s); run again, first run: **FAILED** at service.go:1: context deadline exceeded |",
		"| Services should time out | **FAILED** at service.go:2: still broken; run again, first run: **TIMEDOUT**: spec timeout |",
		"- Portico: 2 passed, 1 failed, 1 skipped while running; specs 0s, cluster and installs 0s; 2 specs that failed were run again on a fresh cluster (1 passed then): specs 1m0s",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
