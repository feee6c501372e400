// Command gen writes the configuration reference, docs/configuration.md (package configref).
// `make docs` runs it from the repository's root.
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"

	"github.com/portico-lb/portico/internal/configref"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	md, err := configref.Markdown(*root)
	if err != nil {
		log.Fatalf("configref: %v", err)
	}
	if err := os.WriteFile(filepath.Join(*root, configref.Path), []byte(md), 0o644); err != nil {
		log.Fatalf("configref: %v", err)
	}
}
