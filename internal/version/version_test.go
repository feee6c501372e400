package version

import "testing"

func TestGet(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = ""
	if got := Get(); got == "" {
		t.Error("Get without ldflags is empty, want a default")
	}
	version = "v1.2.3-4-gabcdef"
	if got := Get(); got != "v1.2.3-4-gabcdef" {
		t.Errorf("Get = %q, want the linker's value", got)
	}
}
