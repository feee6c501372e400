// Package version holds the version every Portico binary reports with --version. `make build`
// sets it from `git describe` with the linker:
//
//	go build -ldflags "-X github.com/portico-lb/portico/internal/version.version=$(git describe --tags --always --dirty)"
//
// A binary built without it (go build, go install, go run) reports the module version Go
// recorded, or "devel".
package version

import "runtime/debug"

// version is set by the linker (-X); empty otherwise.
var version string

// Get returns the binary's version: the linker's, else the main module's version from the
// build information (a tagged `go install`), else "devel".
func Get() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
