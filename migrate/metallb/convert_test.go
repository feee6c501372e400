package metallb

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const ns = DefaultNamespace

// input reads a YAML stream as a file would be read.
func input(t *testing.T, doc string) Input {
	t.Helper()
	var in Input
	if err := readDocuments(&in, []byte(doc), "test.yaml", ns); err != nil {
		t.Fatalf("reading input: %v", err)
	}
	return in
}

// TestGolden converts testdata/config.yaml and compares the YAML and the report with
// testdata/config.golden.yaml (go test -run TestGolden -update rewrites it).
func TestGolden(t *testing.T) {
	in, err := ReadFiles([]string{"testdata/config.yaml"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeReport(&b, &in, res, nil, true)
	report := "# " + strings.ReplaceAll(strings.TrimRight(b.String(), "\n"), "\n", "\n# ") + "\n"
	b.Reset()
	b.WriteString(report)
	if err := PrintYAML(&b, res); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "config.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, got)
	}
}

const pool = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p}
spec:
  addresses: [198.18.10.0/24]
`

func TestConvert(t *testing.T) {
	type want struct {
		err   string   // substring of the InputError; "" for success
		lossy []string // fields of the lossy findings, in order
		check func(t *testing.T, r *Result)
	}
	cases := []struct {
		name string
		yaml string
		want want
	}{
		{
			name: "plain pool hands out .0 and .255 like MetalLB",
			yaml: pool,
			want: want{check: func(t *testing.T, r *Result) {
				p := r.Pools[0]
				if !p.Spec.AllowNetworkAndBroadcast || p.Spec.Addresses[0] != "198.18.10.0/24" || p.Spec.AutoAssign != nil {
					t.Errorf("pool spec = %+v", p.Spec)
				}
				if got := p.Annotations[MigratedFrom]; got != "metallb.io IPAddressPool metallb-system/p" {
					t.Errorf("annotation = %q", got)
				}
			}},
		},
		{
			name: "avoidBuggyIPs on a /24 is Portico's default",
			yaml: pool + "  avoidBuggyIPs: true\n",
			want: want{check: func(t *testing.T, r *Result) {
				if r.Pools[0].Spec.AllowNetworkAndBroadcast {
					t.Error("allowNetworkAndBroadcast set")
				}
			}},
		},
		{
			name: "avoidBuggyIPs on a /23 and a range differs",
			yaml: `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p}
spec:
  addresses: [198.18.10.0/23, 198.18.20.250-198.18.21.5]
  avoidBuggyIPs: true
`,
			want: want{lossy: []string{"spec.avoidBuggyIPs", "spec.avoidBuggyIPs"}},
		},
		{
			name: "host bits and spaces are normalised",
			yaml: `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p}
spec:
  addresses: [198.18.10.7/24, "198.18.11.1 - 198.18.11.9", "2001:DB8::/120"]
`,
			want: want{check: func(t *testing.T, r *Result) {
				got := strings.Join(r.Pools[0].Spec.Addresses, " ")
				if got != "198.18.10.0/24 198.18.11.1-198.18.11.9 2001:db8::/120" {
					t.Errorf("addresses = %s", got)
				}
			}},
		},
		{
			name: "bad address",
			yaml: strings.Replace(pool, "198.18.10.0/24", "198.18.10.0/33", 1),
			want: want{err: "spec.addresses[0]"},
		},
		{
			name: "backwards range",
			yaml: strings.Replace(pool, "198.18.10.0/24", "198.18.10.9-198.18.10.1", 1),
			want: want{err: "lower to a higher"},
		},
		{
			name: "overlapping pools",
			yaml: pool + "---" + strings.Replace(strings.Replace(pool, "name: p", "name: q", 1), "198.18.10.0/24", "198.18.10.128/25", 1),
			want: want{err: "overlaps"},
		},
		{
			name: "service allocation with several selectors",
			yaml: pool + `  serviceAllocation:
    priority: 5
    namespaces: [a]
    namespaceSelectors: [{matchLabels: {x: "1"}}, {matchLabels: {y: "2"}}]
    serviceSelectors: [{matchLabels: {app: web}}]
`,
			want: want{lossy: []string{"spec.serviceAllocation.namespaceSelectors"}, check: func(t *testing.T, r *Result) {
				sa := r.Pools[0].Spec.ServiceAllocation
				if sa.Priority != 5 || sa.Namespaces[0] != "a" || sa.NamespaceSelector.MatchLabels["x"] != "1" || sa.ServiceSelector.MatchLabels["app"] != "web" {
					t.Errorf("serviceAllocation = %+v", sa)
				}
			}},
		},
		{
			name: "bad selector",
			yaml: pool + `  serviceAllocation:
    serviceSelectors: [{matchExpressions: [{key: app, operator: Sideways}]}]
`,
			want: want{err: "serviceSelectors[0]"},
		},
		{
			name: "l2 with service selectors and two node selectors across ads",
			yaml: pool + `---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: a}
spec:
  nodeSelectors: [{matchLabels: {zone: a}}]
  interfaces: [eth1]
  serviceSelectors: [{matchLabels: {app: web}}]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: b}
spec:
  ipAddressPools: [p]
  nodeSelectors: [{matchLabels: {zone: b}}]
  interfaces: [eth0]
`,
			want: want{lossy: []string{"spec.serviceSelectors", "L2Advertisement nodeSelectors"}, check: func(t *testing.T, r *Result) {
				l2 := r.Pools[0].Spec.Announce.L2
				if strings.Join(l2.Interfaces, ",") != "eth0,eth1" || l2.NodeSelector.MatchLabels["zone"] != "a" {
					t.Errorf("l2 = %+v", l2)
				}
			}},
		},
		{
			name: "an l2 ad for every node wins over a selective one",
			yaml: pool + `---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: a}
spec:
  nodeSelectors: [{matchLabels: {zone: a}}]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: b}
`,
			want: want{check: func(t *testing.T, r *Result) {
				if l2 := r.Pools[0].Spec.Announce.L2; l2 == nil || l2.NodeSelector != nil || l2.Interfaces != nil {
					t.Errorf("l2 = %+v", l2)
				}
			}},
		},
		{
			name: "unknown community alias",
			yaml: pool + `---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: a}
spec:
  communities: [nope]
`,
			want: want{err: `"nope" is neither`},
		},
		{
			name: "bad community value",
			yaml: pool + `---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: a}
spec:
  communities: ["65536:1"]
`,
			want: want{err: "not a community"},
		},
		{
			name: "two bgp ads with different settings",
			yaml: pool + `---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: a}
spec:
  aggregationLength: 24
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: b}
`,
			want: want{lossy: []string{"BGPAdvertisements"}, check: func(t *testing.T, r *Result) {
				if b := r.Pools[0].Spec.Announce.BGP; b == nil || *b.AggregationLength != 24 {
					t.Errorf("bgp = %+v", b)
				}
			}},
		},
		{
			name: "peer with every unsupported field",
			yaml: `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: r}
spec:
  myASN: 64512
  peerASN: 64513
  peerAddress: 198.18.0.1
  localASN: 1
  sourceAddress: 198.18.0.2
  connectTime: 5s
  routerID: 1.2.3.4
  enableGracefulRestart: true
  vrf: red
  disableMP: true
  dualStackAddressFamily: true
  password: secret
  peerPort: 1179
  ebgpMultiHop: true
`,
			want: want{lossy: []string{"spec.password", "spec.localASN", "spec.sourceAddress", "spec.connectTime", "spec.routerID", "spec.enableGracefulRestart", "spec.vrf", "spec.disableMP", "spec.dualStackAddressFamily"},
				check: func(t *testing.T, r *Result) {
					p := r.Peers[0].Spec
					if p.Port != 1179 || p.EBGPMultihopTTL != 255 || p.PasswordSecretRef != nil {
						t.Errorf("peer = %+v", p)
					}
				}},
		},
		{
			name: "unnumbered peer is not converted",
			yaml: `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: r}
spec: {myASN: 64512, peerASN: 64513, interface: eth0}
`,
			want: want{lossy: []string{"spec.interface"}, check: func(t *testing.T, r *Result) {
				if len(r.Peers) != 0 {
					t.Errorf("peers = %+v", r.Peers)
				}
			}},
		},
		{
			name: "hold time of 2s",
			yaml: `
apiVersion: metallb.io/v1beta1
kind: BGPPeer
metadata: {name: r}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 198.18.0.1, holdTime: 2s}
`,
			want: want{err: "at least 3s"},
		},
		{
			name: "missing bfd profile",
			yaml: `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: r}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 198.18.0.1, bfdProfile: nope}
`,
			want: want{err: `BFDProfile "nope" does not exist`},
		},
		{
			name: "bfd echo and multihop",
			yaml: `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: r}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 198.18.0.1, bfdProfile: e, ebgpMultiHop: true}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: e}
spec: {echoMode: true, echoInterval: 50, passiveMode: true, minimumTtl: 250}
`,
			want: want{lossy: []string{"spec.echoMode", "spec.passiveMode", "spec.minimumTtl", "spec.bfdProfile"}, check: func(t *testing.T, r *Result) {
				if r.Peers[0].Spec.BFD != nil {
					t.Error("BFD kept with multihop")
				}
			}},
		},
		{
			name: "ipv4 peer with an ipv6 bgp pool",
			yaml: strings.Replace(pool, "198.18.10.0/24", "2001:db8:10::/120", 1) + `---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: a}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: r}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 198.18.0.1}
`,
			want: want{lossy: []string{"spec.peerAddress"}},
		},
		{
			name: "ad names a peer that does not exist",
			yaml: pool + `---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: a}
spec: {peers: [ghost]}
`,
			want: want{lossy: []string{"spec.peers"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Convert(input(t, tc.yaml))
			if tc.want.err != "" {
				var ie *InputError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("err = %v, want an InputError containing %q", err, tc.want.err)
				}
				if res != nil {
					t.Errorf("a result came with the error: %+v", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var lossy []string
			for _, f := range res.Findings {
				if f.Lossy {
					lossy = append(lossy, f.Field)
				}
			}
			if fmt.Sprint(lossy) != fmt.Sprint(tc.want.lossy) {
				t.Errorf("lossy findings on %v, want %v; findings:\n%v", lossy, tc.want.lossy, res.Findings)
			}
			if res.Lossy() != (len(tc.want.lossy) > 0) {
				t.Errorf("Lossy() = %v", res.Lossy())
			}
			if tc.want.check != nil {
				tc.want.check(t, res)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	cases := []struct{ name, yaml, err string }{
		{"unknown field", pool + "  preferredNodes: [a]\n", `unknown field "preferredNodes"`},
		{"wrong type", strings.Replace(pool, "[198.18.10.0/24]", "198.18.10.0/24", 1), "cannot unmarshal"},
		{"unknown version", strings.Replace(pool, "v1beta1", "v1", 1), "not supported"},
		{"no name", strings.Replace(pool, "metadata: {name: p}", "metadata: {}", 1), "without metadata.name"},
		{"not yaml", "a: [", "test.yaml #1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in Input
			err := readDocuments(&in, []byte(tc.yaml), "test.yaml", ns)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestReadSkips(t *testing.T) {
	in := input(t, pool+`---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: elsewhere, namespace: other}
spec: {addresses: [198.18.30.0/24]}
---
apiVersion: metallb.io/v1beta1
kind: ServiceL2Status
metadata: {name: s}
---
apiVersion: v1
kind: List
items:
- apiVersion: metallb.io/v1beta1
  kind: L2Advertisement
  metadata: {name: in-list}
`)
	if len(in.Pools) != 1 || in.Pools[0].Name != "p" || in.Pools[0].Namespace != ns {
		t.Errorf("pools = %+v", in.Pools)
	}
	if len(in.L2) != 1 || in.L2[0].Name != "in-list" {
		t.Errorf("l2 = %+v", in.L2)
	}
	if len(in.Ignored) != 2 {
		t.Errorf("ignored = %q, want the other namespace's pool and the status", in.Ignored)
	}
}

func TestCountDotZero255(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  uint64
	}{
		{"198.18.10.0/24", 2}, {"198.18.10.0/23", 4}, {"198.18.10.128/25", 1},
		{"198.18.10.1/32", 0}, {"198.18.10.255-198.18.11.0", 2}, {"198.18.0.0/16", 512},
	} {
		first, last, _ := bounds(tc.entry)
		if got := countDotZero255(first, last); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.entry, got, tc.want)
		}
	}
}

func TestBFDDurations(t *testing.T) {
	in, err := ReadFiles([]string{"testdata/config.yaml"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(in)
	if err != nil {
		t.Fatal(err)
	}
	var peer *v1alpha1.BGPPeer
	for i := range res.Peers {
		if res.Peers[i].Name == "tor" {
			peer = &res.Peers[i]
		}
	}
	if peer == nil || peer.Spec.BFD == nil {
		t.Fatalf("peers = %+v", res.Peers)
	}
	if peer.Spec.BFD.ReceiveInterval.Duration != 100*time.Millisecond || peer.Spec.BFD.TransmitInterval.Duration != 150*time.Millisecond || peer.Spec.BFD.Multiplier != 4 {
		t.Errorf("bfd = %+v", peer.Spec.BFD)
	}
}
