package conformance

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ColumnResult is one column's run: the specs' outcomes on a cluster with that service proxy.
type ColumnResult struct {
	Column Column
	Specs  []Spec
	// Took is the ginkgo run alone; Setup the cluster's start and the installs before it.
	Took, Setup time.Duration
	// RerunTook and RerunSetup are those of the re-run of the failed specs, if any (Specs
	// then holds MergeRerun's result).
	RerunTook, RerunSetup time.Duration
	// Err is set when the column could not run (its specs are then missing).
	Err error
	// SuiteFailures are the suite nodes that failed (ReadSuiteFailures); GinkgoExit is
	// ginkgo's exit when not 0; Want is the number of specs the selection pins for the column
	// (Selection.Want; 0: not pinned).
	SuiteFailures []Spec
	GinkgoExit    error
	Want          int
}

// Incomplete lists what makes the run say less than its specs claim: the column did not
// run, a suite node failed, ginkgo exited with an error while no spec failed, or the
// number of specs that ran (or were skipped while running) is not the one the selection
// pins (specs that never ran, or a selection that changed upstream).
func (r ColumnResult) Incomplete() []string {
	var out []string
	if r.Err != nil {
		out = append(out, fmt.Sprintf("the column did not complete: %v", r.Err))
	}
	for _, s := range r.SuiteFailures {
		out = append(out, fmt.Sprintf("%s: %s at %s: %s", s.Name, s.State, s.Location, oneLine(s.Message, 300)))
	}
	failed := slices.ContainsFunc(r.Specs, func(s Spec) bool { return !s.Passed() && s.State != "skipped" })
	if r.GinkgoExit != nil && !failed && len(r.SuiteFailures) == 0 {
		out = append(out, fmt.Sprintf("ginkgo failed although no spec or suite node did: %v", r.GinkgoExit))
	}
	if r.Want > 0 && len(r.Specs) != r.Want {
		out = append(out, fmt.Sprintf("%d specs ran (or were skipped while running), the selection pins %d: specs never ran, or the selection changed", len(r.Specs), r.Want))
	}
	return out
}

// cell is a column's verdict on a spec for the table.
func (r ColumnResult) cell(name string) string {
	i := slices.IndexFunc(r.Specs, func(s Spec) bool { return s.Name == name })
	if i < 0 && r.Column.LoadBalancersOnly && !strings.HasPrefix(name, "[sig-network] LoadBalancers ") {
		return "n/a"
	}
	if i < 0 {
		if r.Err != nil {
			return "not run"
		}
		return "–"
	}
	s := r.Specs[i]
	if reason, ok := r.Column.NotApplicable(name); ok {
		return "n/a: " + oneLine(reason, 120)
	}
	if s.Earlier != nil {
		return verdict(s) + "; run again, first run: " + verdict(*s.Earlier)
	}
	return verdict(s)
}

func verdict(s Spec) string {
	switch s.State {
	case "passed":
		return fmt.Sprintf("pass (%ds)", int(s.Time.Seconds()+0.5))
	case "skipped":
		return "skipped: " + oneLine(s.Message, 60)
	default:
		where := ""
		if s.Location != "" {
			where = " at " + s.Location
		}
		return fmt.Sprintf("**%s**%s: %s", strings.ToUpper(s.State), where, oneLine(s.Message, 80))
	}
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.NewReplacer("|", "\\|", "`", "'").Replace(s)
	if len([]rune(s)) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

// Table renders the results as a Markdown table (spec, then one column per result) with a
// line per column's totals and run time below it.
func Table(results []ColumnResult) string {
	var names []string
	for _, r := range results {
		for _, s := range r.Specs {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("| spec |")
	for _, r := range results {
		fmt.Fprintf(&b, " %s |", r.Column.Name)
	}
	b.WriteString("\n|---|")
	for range results {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| %s |", oneLine(shortName(n), 200))
		for _, r := range results {
			fmt.Fprintf(&b, " %s |", r.cell(n))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, r := range results {
		counts := map[string]int{}
		again, passedAgain, na := 0, 0, 0
		for _, s := range r.Specs {
			if _, ok := r.Column.NotApplicable(s.Name); ok {
				na++
				continue
			}
			counts[s.State]++
			if s.Earlier != nil {
				again++
				if s.Passed() {
					passedAgain++
				}
			}
		}
		fmt.Fprintf(&b, "- %s: %d passed, %d failed, %d skipped while running", r.Column.Name, counts["passed"], len(r.Specs)-na-counts["passed"]-counts["skipped"], counts["skipped"])
		if na > 0 {
			fmt.Fprintf(&b, ", %d not applicable", na)
		}
		for _, p := range r.Incomplete() {
			if r.Err == nil || !strings.HasPrefix(p, "the column did not complete") {
				fmt.Fprintf(&b, "; **%s**", oneLine(p, 200))
			}
		}
		if r.Err != nil {
			fmt.Fprintf(&b, "; the column did not complete: %s", oneLine(r.Err.Error(), 200))
		}
		fmt.Fprintf(&b, "; specs %s, cluster and installs %s", r.Took.Round(time.Second), r.Setup.Round(time.Second))
		if again > 0 {
			fmt.Fprintf(&b, "; %d specs that failed were run again on a fresh cluster (%d passed then): specs %s, cluster and installs %s",
				again, passedAgain, r.RerunTook.Round(time.Second), r.RerunSetup.Round(time.Second))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// shortName drops the "[sig-network] " prefix every selected spec has.
func shortName(n string) string { return strings.TrimPrefix(n, "[sig-network] ") }

// Markers delimit the generated tables in a Markdown file: the IPv4 columns' table between
// BeginMarker and EndMarker, the IPv6 columns' between BeginMarker6 and EndMarker6, the
// announce-only columns' (kube-proxy with Portico's announcer, Column.Announcer) between
// BeginMarkerAnnouncer and EndMarkerAnnouncer.
const (
	BeginMarker          = "<!-- conformance-table:begin (make conformance writes this) -->"
	EndMarker            = "<!-- conformance-table:end -->"
	BeginMarker6         = "<!-- conformance-table-ipv6:begin (make conformance writes this) -->"
	EndMarker6           = "<!-- conformance-table-ipv6:end -->"
	BeginMarkerAnnouncer = "<!-- conformance-table-announcer:begin (make conformance writes this) -->"
	EndMarkerAnnouncer   = "<!-- conformance-table-announcer:end -->"
)

// TableKind names one of the page's tables.
type TableKind int

// The page's tables, in their order.
const (
	IPv4Table TableKind = iota
	IPv6Table
	AnnouncerTable
)

// markers are a table's begin and end markers.
func (k TableKind) markers() (begin, end string) {
	switch k {
	case IPv6Table:
		return BeginMarker6, EndMarker6
	case AnnouncerTable:
		return BeginMarkerAnnouncer, EndMarkerAnnouncer
	}
	return BeginMarker, EndMarker
}

// Table is the table a column's results go into.
func (c Column) Table() TableKind {
	switch {
	case c.Announcer:
		return AnnouncerTable
	case c.IPv6:
		return IPv6Table
	}
	return IPv4Table
}

// TableResults are the results of one of the page's tables.
type TableResults struct {
	Kind    TableKind
	Results []ColumnResult
}

// ByTable splits results by their columns' tables (Column.Table), the tables in their order
// and each table's results in theirs; tables without a result are left out.
func ByTable(results []ColumnResult) []TableResults {
	var out []TableResults
	for _, k := range []TableKind{IPv4Table, IPv6Table, AnnouncerTable} {
		t := TableResults{Kind: k}
		for _, r := range results {
			if r.Column.Table() == k {
				t.Results = append(t.Results, r)
			}
		}
		if len(t.Results) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// WriteBetweenMarkers replaces what lies between the markers of table kind in the file at
// path with content.
func WriteBetweenMarkers(path string, kind TableKind, content string) error {
	begin, end := kind.markers()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the markers %q and %q", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + content + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
