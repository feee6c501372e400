package operations

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"
)

// crdCase is one object the API server is given: kind AddressPool or BGPPeer, its spec as YAML
// (for BGPPeer laid over crdPeerBase), and what the refusal must say (the field's path and a
// piece of the message); nil want means the object is accepted.
type crdCase struct {
	name string
	kind string
	spec string
	want []string
}

// crdPeerBase is a valid BGPPeer spec the peer cases change.
const crdPeerBase = `{peerAddress: 198.19.0.1, peerASN: 64512, myASN: 64513}`

var crdCases = []crdCase{
	// AddressPool addresses: CIDRs.
	{"pool v4 CIDR", "AddressPool", `{addresses: [198.18.172.0/24]}`, nil},
	{"pool v6 CIDR", "AddressPool", `{addresses: ["2001:db8:172::/64", "fd00:c613:172::/120"]}`, nil},
	{"pool /32 and /128", "AddressPool", `{addresses: [198.18.172.7/32, "2001:db8:172::7/128"]}`, nil},
	{"pool bad address and prefix", "AddressPool", `{addresses: [999.1.1.1/99]}`,
		[]string{"spec.addresses[0]", "Invalid value: \"999.1.1.1/99\": not a CIDR"}},
	{"pool v4 prefix over 32", "AddressPool", `{addresses: [198.18.172.0/33]}`,
		[]string{"spec.addresses[0]", "Invalid value: \"198.18.172.0/33\": not a CIDR"}},
	{"pool v6 prefix over 128", "AddressPool", `{addresses: ["2001:db8::/129"]}`,
		[]string{"spec.addresses[0]", "Invalid value: \"2001:db8::/129\": not a CIDR"}},
	{"pool second entry bad", "AddressPool", `{addresses: [198.18.172.0/24, 198.18.173.0]}`,
		[]string{"spec.addresses[1]", "Invalid value: \"198.18.173.0\": not a CIDR"}},
	{"pool v4 host bits", "AddressPool", `{addresses: [198.18.172.5/24]}`,
		[]string{"spec.addresses[0]", "has host bits set"}},
	{"pool v6 host bits", "AddressPool", `{addresses: ["2001:db8:172::1/64"]}`,
		[]string{"spec.addresses[0]", "has host bits set"}},
	{"pool IPv4-mapped IPv6", "AddressPool", `{addresses: ["::ffff:198.18.172.0/120"]}`,
		[]string{"spec.addresses[0]", "not a CIDR"}},
	{"pool zone", "AddressPool", `{addresses: ["fe80::1%eth0-fe80::2"]}`,
		[]string{"spec.addresses[0]", "not a CIDR"}},
	{"pool text", "AddressPool", `{addresses: [all]}`, []string{"spec.addresses[0]", "Invalid value: \"all\": not a CIDR"}},
	// Ranges.
	{"pool v4 range", "AddressPool", `{addresses: [198.18.174.10-198.18.174.20, 198.18.175.9 - 198.18.175.9]}`, nil},
	{"pool v4 range over an octet", "AddressPool", `{addresses: [198.18.176.250-198.18.177.5]}`, nil},
	{"pool v6 range", "AddressPool", `{addresses: ["fd00:c613:178::ffff-fd00:c613:178::1:0", "2001:db8:0:1:1:1:1:1-2001:db8:0:1:1:1:1:2"]}`, nil},
	{"pool v6 range with IPv4 notation", "AddressPool", `{addresses: ["2001:db8:17a::198.18.0.1-2001:db8:17a::198.18.1.0"]}`, nil},
	{"pool v6 range with IPv4 notation reversed", "AddressPool", `{addresses: ["2001:db8:17a::198.18.1.0-2001:db8:17a::198.18.0.255"]}`,
		[]string{"spec.addresses[0]", "must not be before its start"}},
	{"pool range of IPv4-mapped IPv6", "AddressPool", `{addresses: ["::ffff:198.18.0.1-::ffff:198.18.0.2"]}`,
		[]string{"spec.addresses[0]", "not a CIDR"}},
	{"pool v6 range to the end", "AddressPool", `{addresses: ["2001:db8:179::-2001:db8:179:0:ffff:ffff:ffff:ffff"]}`, nil},
	{"pool v4 range reversed", "AddressPool", `{addresses: [198.18.174.20-198.18.174.10]}`,
		[]string{"spec.addresses[0]", "Invalid value: \"198.18.174.20-198.18.174.10\": the end of a range must not be before its start"}},
	{"pool v4 range reversed over an octet", "AddressPool", `{addresses: [198.18.177.5-198.18.176.250]}`,
		[]string{"spec.addresses[0]", "must not be before its start"}},
	{"pool v6 range reversed", "AddressPool", `{addresses: ["fd00:c613:178::1:0-fd00:c613:178::ffff"]}`,
		[]string{"spec.addresses[0]", "must not be before its start"}},
	{"pool v6 range reversed, compressed", "AddressPool", `{addresses: ["2001:db8:179::1-2001:db8:179::"]}`,
		[]string{"spec.addresses[0]", "must not be before its start"}},
	{"pool range of two families", "AddressPool", `{addresses: ["198.18.174.1-2001:db8::1"]}`,
		[]string{"spec.addresses[0]", "the two ends of a range must be of one family"}},
	{"pool range of three", "AddressPool", `{addresses: [198.18.174.1-198.18.174.2-198.18.174.3]}`,
		[]string{"spec.addresses[0]", "not a CIDR"}},
	{"pool range end bad", "AddressPool", `{addresses: [198.18.174.1-198.18.174.256]}`,
		[]string{"spec.addresses[0]", "not a CIDR"}},
	// The pool's other fields.
	{"pool everything", "AddressPool", `{addresses: [198.18.180.0/24], serviceAllocation: {priority: 1, namespaces: [team-a]},
		announce: {l2: {interfaces: [eth0, bond0.100]}, bgp: {peers: [router-1], communities: ["65535:65281"],
		largeCommunities: ["4294967295:1:2"], aggregationLength: 24, aggregationLengthV6: 64}}}`, nil},
	{"pool community over 16 bits", "AddressPool", `{addresses: [198.18.180.0/24], announce: {bgp: {communities: ["65536:1"]}}}`,
		[]string{"spec.announce.bgp.communities[0]", "each 0 to 65535"}},
	{"pool large community over 32 bits", "AddressPool", `{addresses: [198.18.180.0/24], announce: {bgp: {largeCommunities: ["4294967296:1:2"]}}}`,
		[]string{"spec.announce.bgp.largeCommunities[0]", "each 0 to 4294967295"}},
	{"pool interface with slash", "AddressPool", `{addresses: [198.18.180.0/24], announce: {l2: {interfaces: [eth/0]}}}`,
		[]string{"spec.announce.l2.interfaces[0]", "should match"}},
	{"pool interface dot-dot", "AddressPool", `{addresses: [198.18.180.0/24], announce: {l2: {interfaces: [".."]}}}`,
		[]string{"spec.announce.l2.interfaces[0]", "not an interface name"}},
	{"pool interface too long", "AddressPool", `{addresses: [198.18.180.0/24], announce: {l2: {interfaces: [eth0123456789abc]}}}`,
		[]string{"spec.announce.l2.interfaces[0]", "may not be more than 15"}},
	{"pool namespace not a name", "AddressPool", `{addresses: [198.18.180.0/24], serviceAllocation: {namespaces: [Team_A]}}`,
		[]string{"spec.serviceAllocation.namespaces[0]", "should match"}},
	{"pool peer not a name", "AddressPool", `{addresses: [198.18.180.0/24], announce: {bgp: {peers: [Router 1]}}}`,
		[]string{"spec.announce.bgp.peers[0]", "should match"}},

	// BGPPeer.
	{"peer v4", "BGPPeer", `{}`, nil},
	{"peer v6, timers, BFD, password", "BGPPeer", `{peerAddress: "2001:db8::1", port: 1790, holdTime: 9s, keepaliveTime: 3s,
		bfd: {receiveInterval: 100ms, transmitInterval: 100ms, multiplier: 3},
		passwordSecretRef: {namespace: kube-system, name: bgp-password, key: password}}`, nil},
	{"peer 4-byte private ASN", "BGPPeer", `{peerASN: 4200000000, myASN: 4294967294}`, nil},
	{"peer documentation ASNs", "BGPPeer", `{peerASN: 64496, myASN: 65551}`, nil},
	{"peer hold time 0", "BGPPeer", `{holdTime: 0s}`, nil},
	{"peer multihop eBGP without BFD", "BGPPeer", `{ebgpMultihopTTL: 2, bfd: {enabled: false}}`, nil},
	{"peer address bad", "BGPPeer", `{peerAddress: 999.1.1.1}`,
		[]string{"spec.peerAddress", "Invalid value: \"999.1.1.1\": not an IPv4 or IPv6 address"}},
	{"peer address with zone", "BGPPeer", `{peerAddress: "fe80::1%eth0"}`,
		[]string{"spec.peerAddress", "not an IPv4 or IPv6 address"}},
	{"peer address CIDR", "BGPPeer", `{peerAddress: 198.19.0.1/32}`,
		[]string{"spec.peerAddress", "not an IPv4 or IPv6 address"}},
	{"peer address unspecified", "BGPPeer", `{peerAddress: "::"}`,
		[]string{"spec.peerAddress", "the unspecified address cannot be a peer"}},
	{"peer ASN 0", "BGPPeer", `{peerASN: 0}`, []string{"spec.peerASN", "should be greater than or equal to 1"}},
	{"peer ASN AS_TRANS", "BGPPeer", `{peerASN: 23456}`, []string{"spec.peerASN", "is reserved: 23456 is AS_TRANS"}},
	{"my ASN 65535", "BGPPeer", `{myASN: 65535}`, []string{"spec.myASN", "is reserved: 23456 is AS_TRANS"}},
	{"my ASN 4294967295", "BGPPeer", `{myASN: 4294967295}`, []string{"spec.myASN", "is reserved: 23456 is AS_TRANS"}},
	{"peer ASN over 32 bits", "BGPPeer", `{peerASN: 4294967296}`, []string{"spec.peerASN", "should be less than or equal to 4294967295"}},
	{"peer port 0", "BGPPeer", `{port: 0}`, []string{"spec.port", "should be greater than or equal to 1"}},
	{"peer port 65536", "BGPPeer", `{port: 65536}`, []string{"spec.port", "should be less than or equal to 65535"}},
	{"peer hold time 2s", "BGPPeer", `{holdTime: 2s}`, []string{"spec.holdTime", "want 0 (the default, 90s) or 3s to 65535s"}},
	{"peer hold time over 16 bits", "BGPPeer", `{holdTime: 24h}`, []string{"spec.holdTime", "3s to 65535s"}},
	{"peer hold time fraction", "BGPPeer", `{holdTime: 9.5s}`, []string{"spec.holdTime", "want whole seconds"}},
	{"peer hold time not a duration", "BGPPeer", `{holdTime: "90"}`, []string{"spec.holdTime", "should match"}},
	{"peer keepalive not below the default hold time", "BGPPeer", `{keepaliveTime: 90s}`,
		[]string{"spec.keepaliveTime", "must be less than the hold time"}},
	{"peer keepalive over the hold time", "BGPPeer", `{holdTime: 9s, keepaliveTime: 10s}`,
		[]string{"spec.keepaliveTime", "must be less than the hold time"}},
	{"peer BFD interval over 32 bits of microseconds", "BGPPeer", `{bfd: {receiveInterval: 2h}}`,
		[]string{"spec.bfd.receiveInterval", "want at most 4294967295us"}},
	{"peer BFD multiplier 0", "BGPPeer", `{bfd: {multiplier: 0}}`,
		[]string{"spec.bfd.multiplier", "should be greater than or equal to 1"}},
	{"peer multihop iBGP", "BGPPeer", `{myASN: 64512, ebgpMultihopTTL: 2}`,
		[]string{"spec.ebgpMultihopTTL", "only for eBGP peers"}},
	{"peer multihop with BFD", "BGPPeer", `{ebgpMultihopTTL: 2, bfd: {}}`,
		[]string{"spec.ebgpMultihopTTL", "BFD is single-hop"}},
	{"peer password namespace", "BGPPeer", `{passwordSecretRef: {namespace: Kube_System, name: bgp}}`,
		[]string{"spec.passwordSecretRef.namespace", "should match"}},
	{"peer password name", "BGPPeer", `{passwordSecretRef: {namespace: kube-system, name: "bgp/password"}}`,
		[]string{"spec.passwordSecretRef.name", "should match"}},
	{"peer password key", "BGPPeer", `{passwordSecretRef: {namespace: kube-system, name: bgp, key: "pass word"}}`,
		[]string{"spec.passwordSecretRef.key", "should match"}},
}

// TestCRDValidation: the API server (with deploy/crds, the chart's CRDs) refuses every
// malformed AddressPool and BGPPeer with a message naming the field, and accepts the valid
// shapes (IPv4 and IPv6 CIDRs and ranges, 4-byte ASNs, timers, BFD, a password reference).
// On 9824d1b the CRDs held loose patterns: 999.1.1.1/99, /33, reversed ranges, reserved ASNs
// and the rest were accepted (the controller reported some of them later, the agent others).
func TestCRDValidation(t *testing.T) {
	e := crdStart(t, crdDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i, tc := range crdCases {
		t.Run(tc.name, func(t *testing.T) {
			spec := crdSpec(t, tc.spec)
			if tc.kind == "BGPPeer" {
				spec = crdMerge(crdSpec(t, crdPeerBase), spec)
			}
			name := fmt.Sprintf("case-%d", i)
			_, err := e.create(ctx, tc.kind, name, spec, false)
			crdCheck(t, err, tc.want)
		})
	}
}

// crdCheck fails t unless err is nil (want nil) or a refusal as Invalid that says every piece
// of want.
func crdCheck(t *testing.T, err error, want []string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("refused: %v", err)
	case want != nil && err == nil:
		t.Errorf("accepted; want a refusal saying %q", want)
	case want != nil && !apierrors.IsInvalid(err):
		t.Errorf("error %v is not Invalid", err)
	case want != nil:
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal %q does not say %q", err, w)
			}
		}
	}
}

// TestCRDValidationAcceptsRepoObjects: every AddressPool and BGPPeer the repository shows a
// user (deploy/samples.yaml, the chart values of docs/examples and deploy/, the migration
// tool's golden output) passes the CRDs (server-side dry run).
func TestCRDValidationAcceptsRepoObjects(t *testing.T) {
	e := crdStart(t, crdDir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	objs := crdRepoObjects(t)
	if len(objs) < 8 {
		t.Fatalf("found only %d AddressPools and BGPPeers in the repository's files", len(objs))
	}
	for _, o := range objs {
		if _, err := e.create(ctx, o.kind, o.name, o.spec, true); err != nil {
			t.Errorf("%s %s of %s refused: %v", o.kind, o.name, o.file, err)
		}
	}
	t.Logf("%d objects accepted", len(objs))
}

// crdSpec parses a spec written as YAML.
func crdSpec(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("case spec %q: %v", s, err)
	}
	return m
}

// crdMerge lays over's keys over base's (one level).
func crdMerge(base, over map[string]any) map[string]any {
	for k, v := range over {
		base[k] = v
	}
	return base
}
