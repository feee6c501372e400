package conformance

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/portico-lb/portico/e2e/framework/k8sbin"
	"github.com/portico-lb/portico/e2e/framework/nodes"
	"github.com/portico-lb/portico/e2e/framework/process"
	"github.com/portico-lb/portico/internal/images"
	"github.com/portico-lb/portico/internal/ociimage"
	"github.com/portico-lb/portico/internal/prereq"
)

// The names the specs run their images by (k8s.io/kubernetes/test/utils/image at v1.36.3):
// tagged so, the images are found on the nodes and never pulled (the specs' pull policy is
// IfNotPresent).
const (
	AgnhostRef = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"
	BusyBoxRef = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
)

// KubeProxyRef is the kube-proxy image of the comparison columns.
const KubeProxyRef = "portico.invalid/e2e/kube-proxy:" + k8sbin.KubernetesVersion

// pathEnv is every image's PATH: Debian's programs in /usr/bin ahead of busybox's in /bin.
const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Images are the image archives the specs and the kube-proxy columns need.
type Images struct {
	Agnhost, BusyBox, KubeProxy nodes.Image
}

// All lists the images.
func (im Images) All() []nodes.Image { return []nodes.Image{im.Agnhost, im.BusyBox, im.KubeProxy} }

// WgetShim is the agnhost image's wget (/usr/local/bin, ahead of GNU wget's /usr/bin in
// PATH): upstream's image has busybox's wget, which takes a bare IPv6 address as a URL
// ("wget -T 5 -qO- fd00:c613:ff01::c800", as "should only allow access from service
// loadbalancer source ranges" runs it in the IPv6 columns); GNU wget fails on it (exit 4)
// and wants http://[ADDR]/, and busybox-static 1.35's wget crashes with -T. The shim
// rewrites an argument that is a bare IPv6 address (two colons or more, no slash or bracket)
// into that URL and runs GNU wget.
const WgetShim = `#!/bin/bash
args=()
for a in "$@"; do
	if [[ $a != -* && $a == *:*:* && $a != *[/[]* ]]; then
		a="http://[$a]/"
	fi
	args+=("$a")
done
exec /usr/bin/wget "${args[@]}"
`

// BuildImages writes the images into dir, from the built programs and Debian's packages
// (downloaded at the versions the mirror serves for this machine's architecture, kept in
// Portico's cache; internal/images):
//   - agnhost as upstream's image has it where the specs look (/agnhost, entrypoint, and the
//     tools the specs exec in it): bash as /bin/sh (busybox's sh runs its own nc and wget
//     applets ahead of PATH), netcat-openbsd as nc, curl, GNU wget (behind WgetShim),
//     iproute2's ss, and busybox's other applets (sleep, seq, nslookup, ...);
//   - busybox (the specs' default image): busybox-static and its applets;
//   - kube-proxy at the cluster's version with iptables (xtables-nft-multi under the names
//     kube-proxy runs, and its extensions) and nft.
func BuildImages(ctx context.Context, dir string, bins Binaries, log func(string, ...any)) (Images, error) {
	k8s, err := k8sbin.Ensure(ctx, k8sbin.Options{Log: log})
	if err != nil {
		return Images{}, err
	}
	work, err := os.MkdirTemp(dir, "work-")
	if err != nil {
		return Images{}, err
	}
	defer os.RemoveAll(work)
	o := images.DebLayerOptions{DebCache: filepath.Join(prereq.CacheDir(), "debs"), Work: work, Log: log}
	applets, err := busyboxApplets(ctx, o)
	if err != nil {
		return Images{}, err
	}
	var im Images
	// busybox: the applets as links to /bin/busybox.
	bbLinks := map[string]string{}
	for _, a := range applets {
		bbLinks[a] = "/bin/busybox"
	}
	bb, _, err := images.DebLayer(ctx, o, []string{"busybox-static"}, []string{"/bin/busybox"}, bbLinks)
	if err != nil {
		return Images{}, fmt.Errorf("busybox image: %w", err)
	}
	if im.BusyBox, err = writeImage(dir, "busybox", BusyBoxRef, ociimage.Image{Layers: []*ociimage.Layer{baseLayer(), bb}, Cmd: []string{"sh"}, Env: []string{pathEnv}}); err != nil {
		return Images{}, err
	}
	// agnhost: Debian's tools, busybox's other applets, the program.
	ownTools := []string{"/bin/sh", "/bin/bash", "/bin/nc", "/bin/wget", "/bin/ss", "/bin/curl", "/bin/ash"}
	agLinks := map[string]string{"/bin/sh": "bash", "/usr/bin/nc": "/bin/nc.openbsd"}
	for p, target := range bbLinks {
		if !slices.Contains(ownTools, p) {
			agLinks[p] = target
		}
	}
	tools, _, err := images.DebLayer(ctx, o,
		[]string{"bash", "curl", "wget", "netcat-openbsd", "iproute2", "busybox-static"},
		[]string{"/bin/bash", "/usr/bin/curl", "/usr/bin/wget", "/bin/nc.openbsd", "/bin/ss", "/bin/busybox"},
		agLinks)
	if err != nil {
		return Images{}, fmt.Errorf("agnhost image: %w", err)
	}
	var ag ociimage.Layer
	for _, err := range []error{
		ag.AddHostFile("/agnhost", bins.Agnhost),
		ag.AddDir("/usr/local/bin", 0o755, ociimage.Owner{}),
		ag.AddFile("/usr/local/bin/wget", 0o755, []byte(WgetShim)),
		ag.AddSymlink("/agnhost-2", "agnhost"),
		ag.AddDir("/uploads", 0o755, ociimage.Owner{}),
	} {
		if err != nil {
			return Images{}, err
		}
	}
	if im.Agnhost, err = writeImage(dir, "agnhost", AgnhostRef, ociimage.Image{
		Layers: []*ociimage.Layer{baseLayer(), tools, &ag}, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{pathEnv},
	}); err != nil {
		return Images{}, err
	}
	// kube-proxy: iptables under every name it runs, its extensions, nft.
	multi := "/usr/lib/" + images.Multiarch() + "/xtables/*.so"
	exts, err := images.DebFiles(ctx, o, "iptables", multi)
	if err != nil || len(exts) == 0 {
		return Images{}, fmt.Errorf("kube-proxy image: no xtables extensions (%s) in the iptables package: %v", multi, err)
	}
	kpLinks := map[string]string{}
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			kpLinks["/usr/sbin/"+fam+suffix] = "xtables-nft-multi"
		}
	}
	netfilter, _, err := images.DebLayer(ctx, o, []string{"iptables", "nftables"},
		append([]string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/nft"}, exts...), kpLinks)
	if err != nil {
		return Images{}, fmt.Errorf("kube-proxy image: %w", err)
	}
	var kp ociimage.Layer
	if err := kp.AddHostFile("/usr/local/bin/kube-proxy", k8s.KubeProxy); err != nil {
		return Images{}, err
	}
	if im.KubeProxy, err = writeImage(dir, "kube-proxy", KubeProxyRef, ociimage.Image{
		Layers: []*ociimage.Layer{baseLayer(), netfilter, &kp}, Entrypoint: []string{"/usr/local/bin/kube-proxy"}, Env: []string{pathEnv},
	}); err != nil {
		return Images{}, err
	}
	return im, nil
}

// busyboxApplets lists busybox's applets as absolute paths in /bin: busybox --list of the
// busybox-static the images carry (a static program, run from its unpacked package).
func busyboxApplets(ctx context.Context, o images.DebLayerOptions) ([]string, error) {
	bb, err := images.DebHostPath(ctx, o, "busybox-static", "/bin/busybox")
	if err != nil {
		return nil, err
	}
	out, err := process.Run(ctx, bb, "--list")
	if err != nil {
		return nil, fmt.Errorf("listing busybox's applets: %w", err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, path.Join("/bin", a))
		}
	}
	return applets, nil
}

// baseLayer holds /etc/passwd and /etc/group (root, nobody), /tmp and /run.
func baseLayer() *ociimage.Layer {
	var l ociimage.Layer
	for _, err := range []error{
		l.AddFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")),
		l.AddFile("/etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")),
		l.AddDir("/root", 0o700, ociimage.Owner{}),
		l.AddDir("/tmp", 0o777|fs.ModeSticky, ociimage.Owner{}),
		l.AddDir("/run", 0o755, ociimage.Owner{}),
	} {
		if err != nil {
			panic(err) // fixed, valid paths
		}
	}
	return &l
}

// writeImage builds im (layers stored, not compressed: the archive only travels to the
// nodes' containerds) and writes it tagged ref to dir/name.tar.
func writeImage(dir, name, ref string, im ociimage.Image) (nodes.Image, error) {
	im.Stored = true
	img, err := im.Build()
	if err != nil {
		return nodes.Image{}, fmt.Errorf("building the %s image: %w", name, err)
	}
	archive := filepath.Join(dir, name+".tar")
	if err := ociimage.WriteArchive(archive, ref, img); err != nil {
		return nodes.Image{}, err
	}
	return nodes.Image{Ref: ref, Archive: archive}, nil
}
