package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RunOptions say how to run a selection of specs.
type RunOptions struct {
	Binaries Binaries
	// Kubeconfig is an admin kubeconfig of the cluster.
	Kubeconfig string
	// Tester is the namespace e2e.test runs in.
	Tester *Tester
	// Nodes is the cluster's node count (--num-nodes).
	Nodes int
	// Dir receives the ginkgo JSON report, the output and the specs' own output.
	Dir string
	// Procs is the number of parallel ginkgo processes (at least 1).
	Procs int
	// Focus and Skip are ginkgo's regular expressions over the specs' full text.
	Focus, Skip string
	// Timeout bounds the whole run (ginkgo --timeout).
	Timeout time.Duration
}

// Spec is the outcome of one spec.
type Spec struct {
	// Name is the spec's full text: its containers' texts and its own, space-separated.
	Name string
	// State is ginkgo's: passed, failed, skipped, pending, panicked, interrupted, aborted,
	// timedout.
	State string
	// Message is the failure or skip message.
	Message string
	// Location is where the failure happened.
	Location string
	Time     time.Duration
	// Earlier is the outcome of the spec's earlier run when this one is a re-run (MergeRerun).
	Earlier *Spec
}

// Passed reports whether the spec passed.
func (s Spec) Passed() bool { return s.State == "passed" }

// Run runs ginkgo with e2e.test in the tester's namespace (ip netns exec) and returns the
// specs that ran or were skipped while running (those the filters left out are not listed),
// and how long the run took. A run in which specs failed is no error; a run that produced no
// report is.
// RunResult is what a ginkgo run left: its specs, the failures of its suite nodes
// (BeforeSuite, AfterSuite and their synchronized and report forms), how long it took, and
// ginkgo's exit (nil for status 0).
type RunResult struct {
	Specs, SuiteFailures []Spec
	Took                 time.Duration
	Exit                 error
}

// Run runs the selection's specs with ginkgo in the tester's namespace and reads its report.
// The error is set only when there is no report to read.
func Run(ctx context.Context, o RunOptions) (RunResult, error) {
	if o.Procs < 1 {
		o.Procs = 1
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return RunResult{}, err
	}
	out, err := os.Create(filepath.Join(o.Dir, "ginkgo.log"))
	if err != nil {
		return RunResult{}, err
	}
	defer out.Close()
	args := []string{"netns", "exec", o.Tester.NS, o.Binaries.Ginkgo,
		"--procs=" + strconv.Itoa(o.Procs),
		"--timeout=" + o.Timeout.String(),
		"--no-color",
		"--silence-skips",
		"--poll-progress-after=5m",
		"--output-dir=" + o.Dir,
		"--json-report=report.json",
		"--focus=" + o.Focus,
	}
	if o.Skip != "" {
		args = append(args, "--skip="+o.Skip)
	}
	args = append(args, o.Binaries.E2ETest, "--",
		"--kubeconfig="+o.Kubeconfig,
		"--kubectl-path="+o.Binaries.Kubectl,
		"--provider=local",
		"--num-nodes="+strconv.Itoa(o.Nodes),
		"--e2e-output-dir="+o.Dir,
		"--dump-logs-on-failure=true",
		"--disable-log-dump",
		"--minStartupPods=-1",
	)
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// Stop the whole group (ginkgo and its e2e.test processes) when ctx ends.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	begin := time.Now()
	runErr := cmd.Run()
	took := time.Since(begin)
	res := RunResult{Took: took, Exit: runErr}
	if runErr != nil {
		res.Exit = fmt.Errorf("ginkgo: %w (output in %s)", runErr, out.Name())
	}
	report := filepath.Join(o.Dir, "report.json")
	if res.Specs, err = ReadReport(report); err != nil {
		return res, fmt.Errorf("ginkgo (%v) left no report: %w (output in %s)", runErr, err, out.Name())
	}
	if res.SuiteFailures, err = ReadSuiteFailures(report); err != nil {
		return res, err
	}
	return res, nil
}

// ginkgoReport is the part of ginkgo's JSON report (a list of suite reports) read here.
type ginkgoReport []struct {
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeType            string
		LeafNodeText            string
		State                   string
		RunTime                 time.Duration
		Failure                 struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
		}
	}
}

// ReadSuiteFailures reads the suite nodes of a ginkgo JSON report (BeforeSuite, AfterSuite and
// their synchronized and report forms) that did not pass: a failure there fails the run even
// when every spec passed, and may leave specs unrun.
func ReadSuiteFailures(path string) ([]Spec, error) {
	r, err := readGinkgoReport(path)
	if err != nil {
		return nil, err
	}
	var failed []Spec
	for _, suite := range r {
		for _, s := range suite.SpecReports {
			if s.LeafNodeType == "It" || s.State == "passed" || s.State == "skipped" {
				continue
			}
			sp := Spec{Name: "[" + s.LeafNodeType + "] " + s.LeafNodeText, State: s.State, Message: s.Failure.Message, Time: s.RunTime}
			if s.Failure.Location.FileName != "" {
				sp.Location = fmt.Sprintf("%s:%d", filepath.Base(s.Failure.Location.FileName), s.Failure.Location.LineNumber)
			}
			failed = append(failed, sp)
		}
	}
	return failed, nil
}

func readGinkgoReport(path string) (ginkgoReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r ginkgoReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return r, nil
}

// ReadReport reads the specs of a ginkgo JSON report: those that ran, and those skipped
// while running (e2eskipper), with their message; specs the filters left out are not listed.
func ReadReport(path string) ([]Spec, error) {
	r, err := readGinkgoReport(path)
	if err != nil {
		return nil, err
	}
	var specs []Spec
	for _, suite := range r {
		for _, s := range suite.SpecReports {
			if s.LeafNodeType != "It" {
				continue // suite setup and teardown nodes
			}
			if s.State == "skipped" && s.Failure.Message == "" {
				continue // left out by the filters
			}
			sp := Spec{
				Name:    strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " "),
				State:   s.State,
				Message: s.Failure.Message,
				Time:    s.RunTime,
			}
			if s.Failure.Location.FileName != "" {
				sp.Location = fmt.Sprintf("%s:%d", filepath.Base(s.Failure.Location.FileName), s.Failure.Location.LineNumber)
			}
			specs = append(specs, sp)
		}
	}
	return specs, nil
}
