// Command push builds Portico's images for several platforms and pushes them, with an SBOM
// each, and the Helm chart to an OCI registry (package internal/publish): one image index per
// component at <registry>/<binary>:<version> (linux/amd64 and linux/arm64 by default), and
// the chart at oci://<registry>/charts/portico with version and appVersion from -version.
// `make push REGISTRY=host:port[/prefix]` runs it. Credentials: PORTICO_REGISTRY_USERNAME
// and PORTICO_REGISTRY_PASSWORD, else those of `docker login` (images) and `helm registry
// login` (chart).
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

	"github.com/portico-lb/portico/internal/prereq"
	"github.com/portico-lb/portico/internal/publish"
)

func main() {
	o := publish.Options{Log: log.Printf, Username: os.Getenv("PORTICO_REGISTRY_USERNAME"), Password: os.Getenv("PORTICO_REGISTRY_PASSWORD")}
	flag.StringVar(&o.Registry, "registry", "", "host[:port][/prefix] the images and the chart go to (required)")
	flag.BoolVar(&o.Insecure, "insecure", false, "talk plain HTTP to the registry (a lab registry without TLS)")
	flag.StringVar(&o.Version, "version", "", "the images' tag and the chart's appVersion (required; make push passes git describe)")
	flag.StringVar(&o.Chart, "chart", "deploy/chart/portico", "the chart's directory; empty: push no chart")
	flag.StringVar(&o.DebCache, "deb-cache", filepath.Join(prereq.CacheDir(), "debs"), "where downloaded Debian packages are kept")
	platforms := flag.String("platforms", strings.Join(publish.DefaultPlatforms, ","), "comma list of architectures (GOARCH), linux each")
	only := flag.String("only", "", "comma list of images to push (default: all)")
	flag.Parse()
	if o.Registry == "" || o.Version == "" || flag.NArg() > 0 {
		log.Fatal("push: -registry and -version are required and no arguments are taken")
	}
	o.Platforms = strings.Split(*platforms, ",")
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	work, err := os.MkdirTemp("", "portico-push-")
	if err != nil {
		log.Fatalf("push: %v", err)
	}
	o.Work = work
	res, err := publish.Push(ctx, o)
	os.RemoveAll(work)
	if err != nil {
		log.Fatalf("push: %v", err)
	}
	for _, ix := range res.Indexes {
		fmt.Printf("%s@%s\n", ix.Ref, ix.Digest)
		for _, p := range ix.Images {
			fmt.Printf("  linux/%-6s %s %6.1f MB  sbom %s\n", p.Arch, p.Digest, float64(p.Size)/1e6, p.SBOM)
		}
	}
	if res.Chart != "" {
		fmt.Printf("%s --version %s (%s)\n", res.Chart, res.ChartVersion, res.ChartDigest)
	}
	fmt.Printf("built in %s, pushed in %s\n", res.BuildTime.Round(100*time.Millisecond), res.PushTime.Round(100*time.Millisecond))
}
