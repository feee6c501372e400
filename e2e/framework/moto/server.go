package moto

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/ports"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/e2e/framework/wait"
	"github.com/portico-lb/portico/internal/prereq"
)

// Version is the moto release the harness requires.
const Version = prereq.MotoVersion

// Static credentials and identity of every server. moto accepts any credentials and maps
// unknown access keys to its default account.
const (
	AccessKeyID     = "testing"
	SecretAccessKey = "testing"
	AccountID       = "123456789012"
	DefaultRegion   = "us-east-1"
)

// EnvServer names the environment variable that overrides the moto_server path.
const EnvServer = prereq.MotoServerEnv

// harnessAppID marks the harness's own requests (seeding, inventory) in their User-Agent, so
// that Calls leaves them out of what the code under test did.
const harnessAppID = "portico-moto-harness"

// dirPrefix names server directories ($TMPDIR/portico-moto-<owner pid>-*); envDir is set in the
// server's environment to its directory, so a sweep can recognise a leftover server.
const (
	dirPrefix = "portico-moto-"
	envDir    = "PORTICO_MOTO_DIR"
	pidFile   = "moto.pid"
)

// Server is a running moto_server on 127.0.0.1.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:PORT, without a trailing slash.
	URL string
	// Region is the region AWSConfig and Seed use (DefaultRegion).
	Region string

	dir  string
	proc *process.Process

	mu     sync.Mutex
	seeded map[string]bool // IDs and ARNs Seed created; Owned leaves them out
}

// Binary returns the moto_server to run, as `make prereqs` installs it: internal/prereq's
// MotoServerPath ($PORTICO_MOTO_SERVER, else <cache>/moto-<version>/bin/moto_server, the cache
// being $PORTICO_CACHE, $XDG_CACHE_HOME/portico or ~/.cache/portico).
func Binary() string { return prereq.Host().MotoServerPath() }

// fixHint says how to install the pinned moto where Binary looks.
func fixHint() string {
	return fmt.Sprintf("run `make prereqs`, or: %s (or set %s)", prereq.Host().MotoInstallCommand("python3"), EnvServer)
}

var checked struct {
	once sync.Once
	err  error
}

// CheckBinary verifies that Binary exists and is moto 5.2.5 (asking the Python interpreter
// named in its #! line). The result is cached for the process.
func CheckBinary() error {
	checked.once.Do(func() { checked.err = checkBinary(Binary()) })
	return checked.err
}

func checkBinary(bin string) error {
	f, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("moto_server not found at %s: %w; %s", bin, err, fixHint())
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	if err != nil || !strings.HasPrefix(line, "#!") {
		return fmt.Errorf("%s is not a moto_server script (no #! line); %s", bin, fixHint())
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return fmt.Errorf("%s has an empty #! line; %s", bin, fixHint())
	}
	args := append(fields[1:], "-c", `import importlib.metadata as m; print(m.version("moto"))`)
	out, err := exec.Command(fields[0], args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("asking %s for its moto version: %w: %s; %s", fields[0], err, out, fixHint())
	}
	if got := strings.TrimSpace(string(out)); got != Version {
		return fmt.Errorf("%s is moto %s, want %s; %s", bin, got, Version, fixHint())
	}
	return nil
}

// StartServer runs a moto_server outside a test (the demo); the caller stops it with Stop. Like
// Start it fails, naming the fix, if the pinned moto is not installed.
func StartServer() (*Server, error) { return start() }

// Start runs a moto_server for t and stops it when t ends. It fails t, naming the fix, if the
// pinned moto is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("moto: %v", err)
		}
	})
	return s
}

var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Shared returns the package's shared server, starting it on first use, and resets it (Reset)
// for t. Tests that use it must not run in parallel with each other. Call Main from TestMain so
// the server is stopped and its directory removed when the tests end; without Main the server
// dies with the test binary (Pdeathsig) and the next run sweeps its directory.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = start()
	}
	s, err := shared.srv, shared.err
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("moto: %v", err)
	}
	s.Reset(t)
	return s
}

// Main runs the tests of a package that uses Shared and stops the shared server afterwards:
//
//	func TestMain(m *testing.M) { moto.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "moto: %v\n", err)
	}
	os.Exit(code)
}

// StopShared stops the shared server, if one was started, and removes its directory: for a
// TestMain that has more to stop than Main does (a control plane) after m.Run.
func StopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		return nil
	}
	err := shared.srv.Stop()
	shared.srv = nil
	return err
}

// start sweeps leftovers of dead runs, then starts moto_server on a free port, retrying if
// another process took the port first.
func start() (*Server, error) {
	if err := CheckBinary(); err != nil {
		return nil, err
	}
	sweep()
	var last error
	for range 3 {
		s, err := startOnce()
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func startOnce() (s *Server, err error) {
	dir, err := cluster.OwnedTempDir(dirPrefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	port, err := ports.Free()
	if err != nil {
		return nil, err
	}
	s = &Server{
		URL:    "http://127.0.0.1:" + strconv.Itoa(port),
		Region: DefaultRegion,
		dir:    dir,
		seeded: map[string]bool{},
	}
	s.proc, err = process.Start(Binary(), process.Options{
		Name: "moto_server",
		Args: []string{"-H", "127.0.0.1", "-p", strconv.Itoa(port)},
		Dir:  dir,
		Env: append(os.Environ(),
			envDir+"="+dir,
			"MOTO_RECORDER_FILEPATH="+filepath.Join(dir, "recording.jsonl"),
			"PYTHONUNBUFFERED=1",
		),
		LogPath: filepath.Join(dir, "moto.log"),
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(s.proc.Pid())), 0o644); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls GET /moto-api/config until moto answers.
func (s *Server) waitReady(timeout time.Duration) error {
	err := wait.Poll(context.Background(), 100*time.Millisecond, timeout, "moto_server to answer", func(context.Context) error {
		if s.proc.Exited() {
			return wait.Stop(fmt.Errorf("moto_server exited (%v) before it was ready", s.proc.Err()))
		}
		resp, err := http.Get(s.URL + "/moto-api/config")
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w; log:\n%s", err, s.LogTail())
	}
	return nil
}

// Stop terminates the server (SIGTERM, then SIGKILL to its process group) and removes its
// directory. It is idempotent.
func (s *Server) Stop() error {
	err := s.proc.Stop(5 * time.Second)
	// Kill anything left in the group (moto starts no children today; this is cheap insurance).
	_ = syscall.Kill(-s.proc.Pid(), syscall.SIGKILL)
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// LogTail returns the end of the server's log (request lines and Python tracebacks).
func (s *Server) LogTail() string { return s.proc.LogTail() }

// Reset wipes all of moto's state (POST /moto-api/reset), stops and clears the recorder, and
// forgets what Seed created.
func (s *Server) Reset(t testing.TB) {
	t.Helper()
	for _, p := range []string{"/moto-api/reset", "/moto-api/recorder/stop-recording", "/moto-api/recorder/reset-recording"} {
		if _, err := s.post(p); err != nil {
			t.Fatalf("moto: %v", err)
		}
	}
	s.mu.Lock()
	s.seeded = map[string]bool{}
	s.mu.Unlock()
}

// post sends an empty POST to a /moto-api path and returns the body.
func (s *Server) post(path string) ([]byte, error) {
	resp, err := http.Post(s.URL+path, "application/json", nil)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("POST %s: %s: %s", path, resp.Status, b)
	}
	return b, nil
}

// AWSConfig returns an aws-sdk-go-v2 configuration for the server: BaseEndpoint, the static
// credentials and Region, the SDK's default retryer and HTTP client. Nothing is read from the
// environment or ~/.aws. ctx is not used today; it keeps the signature of a loader.
func (s *Server) AWSConfig(ctx context.Context) aws.Config {
	return configFor(s.URL, s.Region)
}

func configFor(endpoint, region string) aws.Config {
	return aws.Config{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
	}
}

// HarnessConfig is AWSConfig with the harness's User-Agent marker: a test's own checks of what
// moto holds made with it are left out of Calls, like Seed's and Owned's.
func (s *Server) HarnessConfig() aws.Config { return s.harnessConfig() }

// harnessConfig is AWSConfig with the harness's User-Agent marker.
func (s *Server) harnessConfig() aws.Config {
	cfg := configFor(s.URL, s.Region)
	cfg.AppID = harnessAppID
	return cfg
}

// Env returns environment variables that point the SDK's default credential chain and
// endpoint resolution at the server, for binaries started by a test (portico-controller,
// portico-ccm): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL and
// AWS_EC2_METADATA_DISABLED=true.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_REGION=" + s.Region,
		"AWS_ENDPOINT_URL=" + s.URL,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

func (s *Server) markSeeded(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.seeded[id] = true
	}
}

func (s *Server) isSeeded(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seeded[id]
}

// sweep kills moto servers whose owning test process is gone (Pdeathsig normally does; this
// covers a moto_server that outlived its parent anyway) and removes their directories. A
// server is recognised by its pid file and by envDir=<its directory> in its environment, so a
// recycled pid is never killed.
func sweep() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range matches {
		ownerStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), dirPrefix), "-")
		owner, err := strconv.Atoi(ownerStr)
		if err != nil || owner <= 0 {
			continue
		}
		if err := syscall.Kill(owner, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
				if bytes.Contains(env, []byte(envDir+"="+dir+"\x00")) {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		_ = os.RemoveAll(dir)
	}
}
