package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestOwnedTempDirSweepsOnlyDeadOwners(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(cmd.Process.Pid)+"-sweeptest")
	live := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(os.Getpid())+"-sweeptest")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(live); os.RemoveAll(dead) })
	mine, err := OwnedTempDir(dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mine)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("directory of a dead owner survived: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("directory of a live owner removed: %v", err)
	}
}
