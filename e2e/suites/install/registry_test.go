package install

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-lb/portico/e2e/framework/install"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/process"
)

// TestInstallFromRegistry is a real rollout's path: what `make push` runs pushes the images
// and the chart to a registry on the nodes' LAN (go-containerregistry's pkg/registry on the
// lab's root link), every node's containerd trusts it (hosts.toml), the chart is installed
// from oci://REGISTRY/charts/portico and the kubelets pull the images when they start the
// pods: nothing is imported. A client on the LAN is served through the Service's VIP.
func TestInstallFromRegistry(t *testing.T) {
	c := nodes.New(t, nodes.Options{Nodes: 3, DNS: true, Clients: 1})
	ctx := t.Context()
	client := c.Lab.Clients()[0]
	if _, err := client.Exec(ctx, "ip", "route", "add", onLink, "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(c.Lab.RootAddr(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("registry: %v", err)
		}
	})
	host := ln.Addr().String()
	if err := c.TrustRegistry(host); err != nil {
		t.Fatal(err)
	}
	tag, err := install.DefaultTag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svcs, pods := echoWorkload(t, c)

	begin := time.Now()
	repo := host + "/portico"
	r := install.Must(t, c, install.Options{Tag: tag, Pool: netip.MustParsePrefix(pool), Registry: repo})
	t.Logf("images built and pushed with the chart to %s in %s", repo, r.Pushed.Round(time.Millisecond))
	_, vip := waitVIP(t, svcs, netip.MustParsePrefix(pool))
	reply := firstReply(t, client, netip.AddrPortFrom(vip, nodes.EchoPort), "the client on the LAN")
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == reply.Server }) {
		t.Errorf("the VIP was answered by %q, not an echo pod", reply.Server)
	}
	t.Logf("helm install from oci://%s/charts/portico to the first request served through the VIP %s (images pulled by the kubelets): %s",
		repo, vip, (time.Since(begin) - r.Pushed).Round(time.Millisecond))

	// Every node's containerd has the agent's image by its registry name: pulled, not imported.
	want := repo + "/portico-agent:" + tag
	for _, n := range c.Nodes {
		out, err := process.Run(ctx, "ctr", "--address", n.ContainerdSocket(), "--namespace", "k8s.io", "images", "ls", "-q")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Fields(out), want) {
			t.Errorf("%s: containerd has no %s (images: %s)", n.Name, want, strings.Join(strings.Fields(out), " "))
		}
		if slices.ContainsFunc(strings.Fields(out), func(s string) bool { return strings.HasPrefix(s, install.Repo+"/") }) {
			t.Errorf("%s: an image of %s was imported: %s", n.Name, install.Repo, out)
		}
	}
}
