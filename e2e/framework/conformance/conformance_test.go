package conformance

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	path := filepath.Join(t.TempDir(), "conformance.md")
	if err := os.WriteFile(path, []byte("a\n"+BeginMarker+"\nold\n"+EndMarker+"\nb\n"+BeginMarker6+"\nold6\n"+EndMarker6+"\nc\n"+BeginMarkerAnnouncer+"\nolda\n"+EndMarkerAnnouncer+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The announce-only table alone: the others stay.
	if err := WriteBetweenMarkers(path, AnnouncerTable, "newa\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "a\n" + BeginMarker + "\nold\n" + EndMarker + "\nb\n" + BeginMarker6 + "\nold6\n" + EndMarker6 + "\nc\n" + BeginMarkerAnnouncer + "\nnewa\n" + EndMarkerAnnouncer + "\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	if err := WriteBetweenMarkers(path, IPv4Table, "new\n"); err != nil {
		t.Fatal(err)
	}
	if err := WriteBetweenMarkers(path, IPv6Table, "new6\n"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if want := "a\n" + BeginMarker + "\nnew\n" + EndMarker + "\nb\n" + BeginMarker6 + "\nnew6\n" + EndMarker6 + "\nc\n" + BeginMarkerAnnouncer + "\nnewa\n" + EndMarkerAnnouncer + "\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteBetweenMarkers(path, IPv4Table, "x"); err == nil {
		t.Error("no error without markers")
	}
}

// TestColumns: every column is found by its short name, the IPv6 ones run on an IPv6-first
// cluster, and ByTable splits results into the IPv4, IPv6 and announce-only tables in order;
// docs/conformance.md has every table's markers.
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
	var got []string
	for _, tr := range ByTable(results) {
		var names []string
		for _, r := range tr.Results {
			names = append(names, r.Column.Short)
		}
		got = append(got, strings.Join(names, ","))
	}
	want := []string{"portico,portico-bgp,iptables,nftables", "portico-ipv6,portico-bgp-ipv6,iptables-ipv6,nftables-ipv6", "iptables-announcer,nftables-announcer"}
	if !slices.Equal(got, want) {
		t.Errorf("tables %q, want %q", got, want)
	}
	if tr := ByTable(results[8:]); len(tr) != 1 || tr[0].Kind != AnnouncerTable {
		t.Errorf("the announce-only columns alone: %+v", tr)
	}
	for _, c := range []Column{IPTablesAnnouncerColumn, NFTablesAnnouncerColumn} {
		if !c.Announcer || c.KubeProxy == "" || !c.LoadBalancersOnly || Full.Want(c) != 17 {
			t.Errorf("%s: want kube-proxy with Portico's announcer on the 17 LoadBalancers specs: %+v, pin %d", c.Name, c, Full.Want(c))
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{BeginMarker, EndMarker, BeginMarker6, EndMarker6, BeginMarkerAnnouncer, EndMarkerAnnouncer} {
		if !strings.Contains(string(b), m) {
			t.Errorf("docs/conformance.md lacks %q", m)
		}
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

// TestIncomplete: a run says it is incomplete when a suite node failed, when ginkgo failed
// with every spec passed, and when the number of specs is not the selection's pin; a complete
// run says nothing. The table carries the same findings.
func TestIncomplete(t *testing.T) {
	report := `[{"SuiteDescription":"Kubernetes e2e suite","SpecReports":[
 {"ContainerHierarchyTexts":null,"LeafNodeType":"SynchronizedBeforeSuite","LeafNodeText":"","State":"failed","Failure":{"Message":"no nodes ready","Location":{"FileName":"/x/e2e.go","LineNumber":7}}},
 {"ContainerHierarchyTexts":null,"LeafNodeType":"SynchronizedAfterSuite","LeafNodeText":"","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"a","State":"passed","RunTime":1000000000}
]}]`
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	suite, err := ReadSuiteFailures(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(suite) != 1 || suite[0].Name != "[SynchronizedBeforeSuite] " || suite[0].Location != "e2e.go:7" {
		t.Fatalf("suite failures = %+v, want the BeforeSuite's", suite)
	}
	exit := errors.New("exit status 1")
	for _, c := range []struct {
		name string
		r    ColumnResult
		want []string
	}{
		{"complete", ColumnResult{Column: PorticoColumn, Specs: specs, Want: 1}, nil},
		{"not pinned", ColumnResult{Column: PorticoColumn, Specs: specs}, nil},
		{"suite node failed", ColumnResult{Column: PorticoColumn, Specs: specs, SuiteFailures: suite, GinkgoExit: exit, Want: 1}, []string{"[SynchronizedBeforeSuite] : failed at e2e.go:7: no nodes ready"}},
		{"ginkgo failed alone", ColumnResult{Column: PorticoColumn, Specs: specs, GinkgoExit: exit, Want: 1}, []string{"ginkgo failed although no spec or suite node did"}},
		{"specs never ran", ColumnResult{Column: PorticoColumn, Specs: specs, Want: 21}, []string{"1 specs ran (or were skipped while running), the selection pins 21"}},
	} {
		got := c.r.Incomplete()
		if len(got) != len(c.want) {
			t.Errorf("%s: Incomplete() = %q, want %d findings %q", c.name, got, len(c.want), c.want)
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], c.want[i]) {
				t.Errorf("%s: finding %q lacks %q", c.name, got[i], c.want[i])
			}
		}
		if len(c.want) > 0 && !strings.Contains(Table([]ColumnResult{c.r}), c.want[0]) {
			t.Errorf("%s: the table does not say %q", c.name, c.want[0])
		}
	}
	if Fast.Want(PorticoColumn) != 21 || Full.Want(PorticoColumn) != 66 || Full.Want(PorticoBGPColumn) != 17 {
		t.Errorf("pins: fast %d, full %d, full BGP %d", Fast.Want(PorticoColumn), Full.Want(PorticoColumn), Full.Want(PorticoBGPColumn))
	}
}

// TestNotApplicableL2: the L2 column shows the spec not applicable with its reason, whatever
// its outcome, and does not count it as passed; so does kube-proxy's column with Portico's L2
// announcer; the BGP and kube-proxy columns show the outcome.
func TestNotApplicableL2(t *testing.T) {
	name := "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to switch session affinity for LoadBalancer service with Local traffic policy [Slow] [LinuxOnly]"
	specs := []Spec{{Name: name, State: "passed", Time: 41 * time.Second}, {Name: "[sig-network] LoadBalancers x", State: "passed"}}
	table := Table([]ColumnResult{{Column: PorticoColumn, Specs: specs}, {Column: PorticoBGPColumn, Specs: specs}, {Column: IPTablesColumn, Specs: specs},
		{Column: IPTablesAnnouncerColumn, Specs: specs}, {Column: NFTablesAnnouncerColumn, Specs: specs}})
	row := ""
	for _, l := range strings.Split(table, "\n") {
		if strings.Contains(l, "switch session affinity") {
			row = l
		}
	}
	if want := "| n/a: L2 mode (one announcer per VIP)"; strings.Count(row, want) != 2 || strings.Count(row, "pass (41s)") != 3 {
		t.Errorf("row %q: want the two L2 columns %q and the three others pass (41s)", row, want)
	}
	if !strings.Contains(table, "- Portico: 1 passed, 0 failed, 0 skipped while running, 1 not applicable") ||
		!strings.Contains(table, "- Portico BGP+ECMP: 2 passed, 0 failed") {
		t.Errorf("totals wrong:\n%s", table)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range NotApplicableL2 {
		if !strings.Contains(string(b), "`"+n.Pattern+"`") || !strings.Contains(string(b), n.Reason) {
			t.Errorf("docs/conformance.md lacks the not-applicable entry `%s` with its reason %q", n.Pattern, n.Reason)
		}
	}
}
