// Command conformance runs the upstream Kubernetes e2e `[sig-network] Services` and
// LoadBalancers specs against Portico and, side by side, kube-proxy's iptables and nftables
// modes, each on a fresh cluster of real kubelets (e2e/framework/conformance), IPv4 and (the
// -ipv6 columns) IPv6-first dual-stack, and kube-proxy with Portico's agent as the announcer
// only (the -announcer columns), and writes the results tables, one per family and one for
// the announce-only columns;
// `make conformance` runs it as root and puts the tables into docs/conformance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/portico-lb/portico/e2e/framework/conformance"
)

func main() {
	columns := flag.String("columns", "portico,portico-bgp,iptables,nftables", "comma list of columns: portico, portico-bgp (the LoadBalancers specs with the VIPs routed by BGP and ECMP), iptables, nftables; portico-ipv6, portico-bgp-ipv6, iptables-ipv6, nftables-ipv6 (on an IPv6-first dual-stack cluster); iptables-announcer, nftables-announcer (kube-proxy with Portico's agent announcing by L2, by BGP+ECMP: the LoadBalancers specs)")
	selection := flag.String("selection", "full", "full: every [sig-network] Services and LoadBalancers spec; fast: the Conformance Services specs and the LoadBalancers specs")
	procs := flag.Int("procs", 5, "parallel ginkgo processes per column")
	concurrent := flag.Int("concurrent", 1, "columns run at the same time, each on its own cluster")
	out := flag.String("out", "", "directory for the reports (default: a new directory in $TMPDIR)")
	doc := flag.String("doc", "", "Markdown file whose tables between the markers are replaced (make conformance: docs/conformance.md)")
	flag.StringVar(doc, "readme", "", "the old name of -doc")
	timeout := flag.Duration("timeout", 0, "bound each column's ginkgo run (0: the selection's own bound); specs still running then are reported as interrupted")
	from := flag.String("from", "", "instead of running: render the table from earlier runs' -out directories, a comma list of column=dir (e.g. portico=/tmp/a,iptables=/tmp/b); column=dir+dir2 takes the specs run again in dir2 (-rerun dir) in place of dir's")
	focus := flag.String("focus", "", "run only the specs of the selection whose full text this regular expression matches (ginkgo's --focus; the IPv6 columns then add no dual-stack specs)")
	rerun := flag.String("rerun", "", "run again, on a fresh cluster per column, the specs that failed in the earlier run whose -out directory this is (the selection is then those specs); columns without a failure there are left out")
	flag.Parse()
	if *from != "" {
		if err := render(*from, *selection, *doc); err != nil {
			log.Fatalf("conformance: %v", err)
		}
		return
	}
	if err := run(*columns, *selection, *focus, *rerun, *procs, *concurrent, *timeout, *out, *doc); err != nil {
		log.Fatalf("conformance: %v", err)
	}
}

func run(columns, selection, focus, rerun string, procs, concurrent int, timeout time.Duration, out, doc string) error {
	sel := conformance.Full
	switch selection {
	case "full":
	case "fast":
		sel = conformance.Fast
	default:
		return fmt.Errorf("no selection %q (full, fast)", selection)
	}
	if timeout > 0 {
		sel.Timeout = timeout
	}
	if focus != "" {
		sel.Name, sel.Focus, sel.LoadBalancers, sel.Exact = "specs matching "+focus, "("+sel.Focus+").*("+focus+")", "("+sel.LoadBalancers+").*("+focus+")", true
	}
	var cols []conformance.Column
	sels := map[string]conformance.Selection{} // per column's Short
	for _, name := range strings.Split(columns, ",") {
		c, err := conformance.ColumnByName(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		sels[c.Short] = sel
		if rerun != "" {
			earlier, _, _, err := readColumn(c, rerun)
			if err != nil {
				return fmt.Errorf("-rerun: %w", err)
			}
			again, ok := conformance.Rerun(earlier, sel.Timeout)
			if !ok {
				log.Printf("conformance: %s: no failed spec in %s", c.Name, rerun)
				continue
			}
			sels[c.Short] = again
		}
		cols = append(cols, c)
	}
	if out == "" {
		dir, err := os.MkdirTemp("", "portico-conformance-")
		if err != nil {
			return err
		}
		out = dir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	bins, err := conformance.Build(ctx, log.Printf)
	if err != nil {
		return err
	}
	imgDir := filepath.Join(out, "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	imgs, err := conformance.BuildImages(ctx, imgDir, bins, log.Printf)
	if err != nil {
		return err
	}
	log.Printf("conformance: programs and images ready after %s", time.Since(begin).Round(time.Second))
	// Up to concurrent columns at once, each on its own cluster; results in column order.
	results := make([]conformance.ColumnResult, len(cols))
	sem := make(chan struct{}, max(concurrent, 1))
	var wg sync.WaitGroup
	for i, col := range cols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				results[i] = conformance.ColumnResult{Column: col, Err: ctx.Err()}
				return
			}
			r := conformance.RunColumn(ctx, col, conformance.ColumnOptions{
				Binaries: bins, Images: imgs, Selection: sels[col.Short], Dir: out, Procs: procs,
				Install: conformance.InstallPortico(log.Printf), Logf: log.Printf,
			})
			if r.Err != nil {
				log.Printf("conformance: %s: %v", col.Name, r.Err)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	summary := fmt.Sprintf("%s, %d ginkgo processes per column, %d columns at a time; whole run %s (`make conformance`, %s).\n\n",
		sel.Name, procs, max(concurrent, 1), time.Since(begin).Round(time.Second), time.Now().UTC().Format("2006-01-02"))
	var all string
	err = writeTables(results, doc, func(kind conformance.TableKind, table string) string {
		t := summary + table
		switch kind {
		case conformance.IPv6Table:
			t = "IPv6-first dual-stack clusters (the specs run over IPv6) and upstream's dual-stack specs; " + t
		case conformance.AnnouncerTable:
			t = "kube-proxy programs the Services, Portico's agents (agent.mode none) announce the VIPs; " + t
		}
		all += t
		return t
	})
	fmt.Print(all)
	if werr := os.WriteFile(filepath.Join(out, "table.md"), []byte(all), 0o644); werr != nil {
		return werr
	}
	log.Printf("conformance: reports in %s", out)
	if err != nil {
		return err
	}
	return incomplete(results)
}

// incomplete returns an error naming every column whose run says less than its specs claim
// (ColumnResult.Incomplete): a suite node failed, ginkgo failed with every spec passed, or
// the number of specs is not the selection's pin.
func incomplete(results []conformance.ColumnResult) error {
	var problems []string
	for _, r := range results {
		for _, p := range r.Incomplete() {
			problems = append(problems, r.Column.Name+": "+p)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("incomplete runs (the tables say so too):\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// writeTables renders one table per kind present in results (the IPv4 columns', the IPv6
// columns', the announce-only columns'), passes each through head (which may prefix it) and,
// with doc, writes it between that table's markers, leaving the other tables as they are.
func writeTables(results []conformance.ColumnResult, doc string, head func(kind conformance.TableKind, table string) string) error {
	for _, t := range conformance.ByTable(results) {
		content := head(t.Kind, conformance.Table(t.Results))
		if doc != "" {
			if err := conformance.WriteBetweenMarkers(doc, t.Kind, content); err != nil {
				return err
			}
		}
	}
	return nil
}

// readColumn reads a column's report.json and its run times from an -out directory.
func readColumn(col conformance.Column, dir string) (specs []conformance.Spec, took, setup time.Duration, err error) {
	colDir := filepath.Join(dir, strings.ReplaceAll(col.Name, " ", "-"))
	specs, err = conformance.ReadReport(filepath.Join(colDir, "report.json"))
	if b, err := os.ReadFile(filepath.Join(colDir, "took")); err == nil {
		fmt.Sscan(string(b), &took, &setup)
	}
	return specs, took, setup, err
}

// render writes the table of earlier runs: each column's report.json in its run directory,
// and with dir+dir2 the specs run again in dir2 in place of dir's.
func render(from, selection, doc string) error {
	var results []conformance.ColumnResult
	for _, item := range strings.Split(from, ",") {
		name, dirs, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("-from: %q is not column=dir", item)
		}
		col, err := conformance.ColumnByName(name)
		if err != nil {
			return err
		}
		dir, again, rerun := strings.Cut(dirs, "+")
		r := conformance.ColumnResult{Column: col}
		r.Specs, r.Took, r.Setup, r.Err = readColumn(col, dir)
		if rerun && r.Err == nil {
			var specs []conformance.Spec
			specs, r.RerunTook, r.RerunSetup, r.Err = readColumn(col, again)
			r.Specs = conformance.MergeRerun(r.Specs, specs)
		}
		results = append(results, r)
	}
	return writeTables(results, doc, func(kind conformance.TableKind, table string) string {
		family := "IPv4 clusters"
		switch kind {
		case conformance.IPv6Table:
			family = "IPv6-first dual-stack clusters (the specs run over IPv6) with upstream's dual-stack specs"
		case conformance.AnnouncerTable:
			family = "IPv4 clusters, kube-proxy with Portico's agents (agent.mode none) as the announcers"
		}
		t := fmt.Sprintf("%s selection, %s; each column ran on its own cluster; table assembled from the runs' reports (`-from`).\n\n", selection, family) + table
		fmt.Print(t)
		return t
	})
}
