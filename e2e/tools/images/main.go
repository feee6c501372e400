// Command images builds Portico's container images without Docker and without a registry
// (package internal/images on internal/ociimage): one OCI archive per binary (portico-agent, portico-controller,
// portico-ccm) in -out, tagged <repo>/<binary>:<version> with the version the binaries print
// with --version. The binaries are static (CGO_ENABLED=0); portico-controller and portico-ccm
// run as nonroot (65532) on a base of /etc/passwd, /etc/group and CA certificates;
// portico-agent runs as root (its capabilities are root's) and carries iptables
// (xtables-nft-multi, nf_tables backend) and conntrack from Debian's packages, downloaded with
// apt-get download at the versions the mirror serves for the build's architecture (never
// those installed here), with the libraries they need. Two builds
// of the same source and packages give the same digests. `make images` runs it.
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
	"time"

	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/prereq"
)

func main() {
	o := images.Options{Log: log.Printf}
	flag.StringVar(&o.Out, "out", "bin/images", "directory the archives are written to (<binary>.tar)")
	flag.StringVar(&o.Repo, "repo", "ghcr.io/portico-lb", "image name prefix: <repo>/<binary>:<version>")
	flag.StringVar(&o.Version, "version", "", "tag and --version of the binaries (required; make images passes git describe)")
	flag.StringVar(&o.Arch, "arch", "", "the images' architecture as GOARCH names it (default: this machine's; another needs `make prereqs` for its Debian packages)")
	flag.StringVar(&o.DebCache, "deb-cache", filepath.Join(prereq.CacheDir(), "debs"), "where downloaded Debian packages are kept")
	only := flag.String("only", "", "comma list of images to build (default: all)")
	flag.Parse()
	if o.Version == "" || flag.NArg() > 0 {
		log.Fatal("images: -version is required and no arguments are taken")
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	work, err := os.MkdirTemp("", "portico-images-")
	if err != nil {
		log.Fatalf("images: %v", err)
	}
	o.Work = work
	start := time.Now()
	res, err := images.Build(ctx, o)
	os.RemoveAll(work)
	if err != nil {
		log.Fatalf("images: %v", err)
	}
	for _, r := range res {
		fmt.Printf("%-60s %s %6.1f MB  %s\n", r.Ref, r.Digest, float64(r.Size)/1e6, r.Path)
	}
	fmt.Printf("built %d images in %s\n", len(res), time.Since(start).Round(100*time.Millisecond))
}
