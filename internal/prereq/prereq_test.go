package prereq

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeMachine has the commands in onPath on PATH (under /usr/bin), those in sbin only in
// /usr/sbin, and env as its environment.
func fakeMachine(euid int, onPath, sbin []string, env map[string]string) Machine {
	in := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	return Machine{
		EUID: euid,
		LookPath: func(file string) (string, error) {
			if in(onPath, file) {
				return "/usr/bin/" + file, nil
			}
			return "", errors.New("not found")
		},
		IsExecutable: func(path string) bool {
			return strings.HasPrefix(path, "/usr/sbin/") && in(sbin, filepath.Base(path))
		},
		Getenv: func(key string) string { return env[key] },
	}
}

var allIPTables = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

func TestDecideRoot(t *testing.T) {
	everything := append([]string{"ip"}, allIPTables...)
	for _, tc := range []struct {
		name   string
		m      Machine
		want   verdict
		inMsg  []string // substrings of the message
		notMsg []string
	}{
		{name: "root with everything runs",
			m: fakeMachine(0, everything, nil, nil), want: run},
		{name: "root with everything runs even when skipping is allowed",
			m: fakeMachine(0, everything, nil, map[string]string{SkipPrivilegedEnv: "1"}), want: run},
		{name: "not root fails naming root and the skip variable",
			m: fakeMachine(1000, everything, nil, nil), want: fail,
			inMsg: []string{"not running as root", "run the tests as root", SkipPrivilegedEnv + "=1"}, notMsg: []string{"apt-get"}},
		{name: "missing iptables fails naming the package, the commands and both fixes",
			m: fakeMachine(0, []string{"ip", "iptables"}, nil, nil), want: fail,
			inMsg: []string{"Debian packages not installed: iptables", "iptables-restore", "ip6tables-save",
				"`make prereqs`", "`apt-get install -y iptables`", SkipPrivilegedEnv}, notMsg: []string{"iproute2 (", "as root (e.g."}},
		{name: "missing everything names both packages",
			m: fakeMachine(0, nil, nil, nil), want: fail,
			inMsg: []string{"apt-get install -y iproute2 iptables"}},
		{name: "commands only in /usr/sbin: add it to PATH, do not install",
			m: fakeMachine(0, nil, everything, nil), want: fail,
			inMsg: []string{"not on PATH: /usr/sbin/ip,", "add /usr/sbin to PATH"}, notMsg: []string{"apt-get", "make prereqs"}},
		{name: "opted-in skip skips a non-root run",
			m: fakeMachine(1000, everything, nil, map[string]string{SkipPrivilegedEnv: "1"}), want: skip,
			inMsg: []string{"skipped (" + SkipPrivilegedEnv + "=1): not running as root"}},
		{name: "opted-in skip skips a missing package",
			m: fakeMachine(0, []string{"ip"}, nil, map[string]string{SkipPrivilegedEnv: "true"}), want: skip,
			inMsg: []string{"iptables"}},
		{name: "any other value of the variable fails",
			m: fakeMachine(1000, everything, nil, map[string]string{SkipPrivilegedEnv: "0"}), want: fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := tc.m.decideRoot([]Package{IPRoute2, IPTables})
			if got != tc.want {
				t.Fatalf("verdict %d, want %d (message %q)", got, tc.want, msg)
			}
			for _, s := range tc.inMsg {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			for _, s := range tc.notMsg {
				if strings.Contains(msg, s) {
					t.Errorf("message %q has %q", msg, s)
				}
			}
		})
	}
}

func TestCheckWithoutRoot(t *testing.T) {
	m := fakeMachine(1000, []string{"git"}, nil, nil)
	if err := m.Check(false, Git); err != nil {
		t.Fatalf("Check(false, git) as a user with git: %v", err)
	}
	err := m.Check(false, Git, Bird2)
	miss := AsMissing(err)
	if miss == nil || miss.NotRoot || len(miss.Packages) != 1 || miss.Packages[0].Name != "bird2" {
		t.Fatalf("Check(false, git, bird2) = %v, want bird2 missing and nothing about root", err)
	}
}

func TestCacheDirAndMotoPath(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOME": "/home/u"}, "/home/u/.cache/portico/moto-" + MotoVersion + "/bin/moto_server"},
		{map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/x"}, "/x/portico/moto-" + MotoVersion + "/bin/moto_server"},
		{map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/x", "PORTICO_CACHE": "/c"}, "/c/moto-" + MotoVersion + "/bin/moto_server"},
		{map[string]string{"PORTICO_CACHE": "/c", MotoServerEnv: "/opt/moto_server"}, "/opt/moto_server"},
	} {
		if got := fakeMachine(0, nil, nil, tc.env).MotoServerPath(); got != tc.want {
			t.Errorf("MotoServerPath with %v = %s, want %s", tc.env, got, tc.want)
		}
	}
}

// TestMotoInstalled lays out the files of a virtual environment in a temporary cache: only a
// complete one (moto_server, python, the pinned version's metadata) counts.
func TestMotoInstalled(t *testing.T) {
	cache := t.TempDir()
	m := Host()
	m.Getenv = func(k string) string {
		if k == "PORTICO_CACHE" {
			return cache
		}
		return ""
	}
	venv := m.MotoVenv()
	write := func(rel string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(venv, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		rel  string
		mode os.FileMode
		want bool
	}{
		{"bin/moto_server", 0o755, false},
		{"bin/python", 0o755, false},
		{"lib/python3.11/site-packages/moto-5.2.1.dist-info/METADATA", 0o644, false}, // another version
		{"lib/python3.11/site-packages/moto-" + MotoVersion + ".dist-info/METADATA", 0o644, true},
	}
	for _, s := range steps {
		write(s.rel, s.mode)
		if got := m.MotoInstalled(); got != s.want {
			t.Fatalf("after %s: MotoInstalled = %v, want %v", s.rel, got, s.want)
		}
	}
	if _, err := m.MotoServer(); err != nil {
		t.Fatalf("MotoServer on a complete install: %v", err)
	}
	if err := os.Remove(filepath.Join(venv, "bin", "python")); err != nil {
		t.Fatal(err)
	}
	_, err := m.MotoServer()
	if err == nil || !strings.Contains(err.Error(), "`make prereqs`") || !strings.Contains(err.Error(), MotoRequirement) {
		t.Fatalf("MotoServer without python = %v, want an error naming make prereqs and %s", err, MotoRequirement)
	}
}

func TestMissingArchitectures(t *testing.T) {
	for _, tc := range []struct {
		native  string
		foreign []string
		want    []string
	}{
		{"amd64", nil, []string{"arm64"}},
		{"amd64", []string{"i386", "arm64"}, nil},
		{"arm64", nil, []string{"amd64"}},
	} {
		got := MissingArchitectures([]string{"amd64", "arm64", "arm64"}, tc.native, tc.foreign)
		if !slices.Equal(got, tc.want) {
			t.Errorf("native %s foreign %v: missing %v, want %v", tc.native, tc.foreign, got, tc.want)
		}
	}
}
