package aws

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

func modelProvider(def Kind) *Provider {
	return &Provider{opts: Options{ClusterName: "c1", DefaultType: def}, cluster: "c1"}
}

func node(name, providerID string, labels map[string]string) providers.Node {
	return providers.Node{Name: name, ProviderID: providerID, Labels: labels}
}

func TestDesiredNLB(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	sec := func(v int) *time.Duration { d := time.Duration(v) * time.Second; return &d }
	tests := []struct {
		name          string
		mutate        func(lb *providers.LoadBalancer)
		wantListeners []string // "PROTO:port->TGPROTO:nodePort hc"
		wantWarnings  []string // substrings
		wantInvalid   string   // field
	}{
		{
			name:          "tcp cluster",
			wantListeners: []string{"TCP:80->TCP:30080 TCP:traffic-port 30/10/3/3"},
		},
		{
			name: "local uses the health-check node port",
			mutate: func(lb *providers.LoadBalancer) {
				lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32000
			},
			wantListeners: []string{"TCP:80->TCP:30080 HTTP:32000/healthz 10/6/2/2"},
		},
		{
			name: "annotations override the health check",
			mutate: func(lb *providers.LoadBalancer) {
				lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32000
				optsOf(lb).HealthCheck = HealthCheckOptions{Protocol: "tcp", Port: "traffic-port", HealthyThreshold: i32(5), Interval: sec(20)}
			},
			wantListeners: []string{"TCP:80->TCP:30080 TCP:traffic-port 20/6/5/2"},
		},
		{
			name: "same port TCP and UDP is TCP_UDP",
			mutate: func(lb *providers.LoadBalancer) {
				lb.Ports = []providers.Port{{Protocol: providers.UDP, Port: 53, NodePort: 30053}, {Protocol: providers.TCP, Port: 53, NodePort: 30053}}
			},
			wantListeners: []string{"TCP_UDP:53->TCP_UDP:30053 TCP:traffic-port 30/10/3/3"},
		},
		{
			name: "TCP_UDP needs one node port",
			mutate: func(lb *providers.LoadBalancer) {
				lb.Ports = []providers.Port{{Protocol: providers.UDP, Port: 53, NodePort: 30053}, {Protocol: providers.TCP, Port: 53, NodePort: 30054}}
			},
			wantInvalid: "spec.ports",
		},
		{
			name: "TLS on the named port, ssl backend",
			mutate: func(lb *providers.LoadBalancer) {
				lb.Ports = append(lb.Ports, providers.Port{Name: "https", Protocol: providers.TCP, Port: 443, NodePort: 30443})
				optsOf(lb).SSLCert, optsOf(lb).SSLPorts, optsOf(lb).BackendProtocol = "arn:cert", []string{"https"}, "ssl"
			},
			wantListeners: []string{"TCP:80->TCP:30080 TCP:traffic-port 30/10/3/3", "TLS:443->TLS:30443 TCP:traffic-port 30/10/3/3"},
		},
		{
			name: "Classic-only keys warn",
			mutate: func(lb *providers.LoadBalancer) {
				optsOf(lb).ProxyProtocol = true
				optsOf(lb).ConnectionIdleTimeout = sec(30)
				optsOf(lb).BackendProtocol = "http"
				yes := true
				optsOf(lb).ConnectionDraining = &yes
				optsOf(lb).ConnectionDrainingTimeout = sec(10)
				optsOf(lb).SecurityGroups = []string{"sg-1"}
				optsOf(lb).ExtraSecurityGroups = []string{"sg-2"}
			},
			wantListeners: []string{"TCP:80->TCP:30080 TCP:traffic-port 30/10/3/3"},
			wantWarnings: []string{annotations.AWSProxyProtocol, annotations.AWSConnectionIdleTimeout, annotations.AWSBackendProtocol,
				annotations.AWSConnectionDrainingEnabled, annotations.AWSConnectionDrainingTimeout, annotations.AWSSecurityGroups + " ", annotations.AWSExtraSecurityGroups},
		},
		{
			name: "TLS policy",
			mutate: func(lb *providers.LoadBalancer) {
				optsOf(lb).SSLCert, optsOf(lb).SSLNegotiationPolicy = "arn:cert", "ELBSecurityPolicy-TLS13-1-2-2021-06"
			},
			wantListeners: []string{"TLS:80->TCP:30080 TCP:traffic-port 30/10/3/3 ELBSecurityPolicy-TLS13-1-2-2021-06"},
		},
		{
			name:        "no node port",
			mutate:      func(lb *providers.LoadBalancer) { lb.Ports[0].NodePort = 0 },
			wantInvalid: "spec.ports[0].nodePort",
		},
		{
			name:        "SCTP",
			mutate:      func(lb *providers.LoadBalancer) { lb.Ports[0].Protocol = providers.SCTP },
			wantInvalid: "spec.ports[0].protocol",
		},
		{
			name:        "affinity",
			mutate:      func(lb *providers.LoadBalancer) { lb.SessionAffinity.ClientIP = true },
			wantInvalid: "spec.sessionAffinity",
		},
		{
			name:        "requested IP",
			mutate:      func(lb *providers.LoadBalancer) { lb.RequestedIPs = []netip.Addr{netip.MustParseAddr("198.18.0.1")} },
			wantInvalid: "spec.loadBalancerIP",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb := testLB("svc", nil)
			optsOf(lb).Kind = NLB
			if tt.mutate != nil {
				tt.mutate(lb)
			}
			d, err := modelProvider(Classic).desired(lb)
			if tt.wantInvalid != "" {
				var inv *providers.InvalidError
				if !errors.As(err, &inv) || inv.Field != tt.wantInvalid {
					t.Fatalf("desired() error = %v, want InvalidError at %s", err, tt.wantInvalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range d.NLB.Listeners {
				hc := l.TG.HC
				got = append(got, l.Protocol+":"+itoa(l.Port)+"->"+l.TG.Protocol+":"+itoa(l.TG.Port)+" "+hc.Protocol+":"+hc.Port+hc.Path+" "+
					itoa(hc.Interval)+"/"+itoa(hc.Timeout)+"/"+itoa(hc.Healthy)+"/"+itoa(hc.Unhealthy))
				if l.SSLPolicy != "" && l.SSLPolicy != defaultTLSPolicy {
					got[len(got)-1] += " " + l.SSLPolicy
				}
			}
			if !slices.Equal(got, tt.wantListeners) {
				t.Errorf("listeners:\n got %q\nwant %q", got, tt.wantListeners)
			}
			if len(d.Warnings) != len(tt.wantWarnings) {
				t.Errorf("warnings = %q, want %d", d.Warnings, len(tt.wantWarnings))
			}
			for _, w := range tt.wantWarnings {
				if !slices.ContainsFunc(d.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
					t.Errorf("no warning names %s: %q", w, d.Warnings)
				}
			}
		})
	}
}

func TestDesiredClassic(t *testing.T) {
	tests := []struct {
		name          string
		spec          ServiceOptions
		local         bool
		wantListeners []string // "PROTO:port->INSTPROTO:nodePort cert"
		wantHC        string
		wantInvalid   bool
		udp           bool
	}{
		{name: "tcp", wantListeners: []string{"TCP:80->TCP:30080 ", "TCP:443->TCP:30443 "}, wantHC: "TCP:30080"},
		{name: "local", local: true, wantListeners: []string{"TCP:80->TCP:30080 ", "TCP:443->TCP:30443 "}, wantHC: "HTTP:32000/healthz"},
		{
			name:          "ssl on 443, tcp backend",
			spec:          ServiceOptions{SSLCert: "arn:c", SSLPorts: []string{"443"}},
			wantListeners: []string{"TCP:80->TCP:30080 ", "SSL:443->TCP:30443 arn:c"}, wantHC: "TCP:30080",
		},
		{
			name:          "https backend http",
			spec:          ServiceOptions{SSLCert: "arn:c", SSLPorts: []string{"https"}, BackendProtocol: "http"},
			wantListeners: []string{"HTTP:80->HTTP:30080 ", "HTTPS:443->HTTP:30443 arn:c"}, wantHC: "TCP:30080",
		},
		{
			name:          "ssl backend checks with SSL",
			spec:          ServiceOptions{BackendProtocol: "ssl"},
			wantListeners: []string{"TCP:80->SSL:30080 ", "TCP:443->SSL:30443 "}, wantHC: "SSL:30080",
		},
		{
			name:          "health-check overrides",
			spec:          ServiceOptions{HealthCheck: HealthCheckOptions{Protocol: "HTTP", Port: "8080", Path: "/ready"}},
			wantListeners: []string{"TCP:80->TCP:30080 ", "TCP:443->TCP:30443 "}, wantHC: "HTTP:8080/ready",
		},
		{name: "UDP is invalid", udp: true, wantInvalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb := testLB("svc", nil)
			lb.Ports = []providers.Port{{Name: "https", Protocol: providers.TCP, Port: 443, NodePort: 30443}, {Name: "http", Protocol: providers.TCP, Port: 80, NodePort: 30080}}
			if tt.udp {
				lb.Ports[1].Protocol = providers.UDP
			}
			lb.Options = tt.spec
			optsOf(lb).Kind = Classic
			if tt.local {
				lb.LocalTrafficOnly, lb.HealthCheckNodePort = true, 32000
			}
			d, err := modelProvider(Classic).desired(lb)
			if tt.wantInvalid {
				if !providers.IsInvalid(err) {
					t.Fatalf("err = %v, want invalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range d.Classic.Listeners {
				got = append(got, l.Protocol+":"+itoa(l.Port)+"->"+l.InstanceProtocol+":"+itoa(l.InstancePort)+" "+l.CertARN)
			}
			if !slices.Equal(got, tt.wantListeners) {
				t.Errorf("listeners:\n got %q\nwant %q", got, tt.wantListeners)
			}
			if d.Classic.HealthCheck.Target != tt.wantHC {
				t.Errorf("health check %s, want %s", d.Classic.HealthCheck.Target, tt.wantHC)
			}
		})
	}
}

func TestDesiredCommon(t *testing.T) {
	nodes := []providers.Node{
		node("a", "aws:///us-east-1a/i-aaa", map[string]string{"pool": "edge"}),
		node("b", "aws://us-east-1b/i-bbb", map[string]string{"pool": "web"}),
		node("c", "kind://docker/c", map[string]string{"pool": "edge"}),
		node("d", "i-ddd", nil),
	}
	lb := testLB("svc", nodes)
	d, err := modelProvider(NLB).desired(lb)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != NLB {
		t.Errorf("kind %s: the configured default (nlb) must apply without the type annotation", d.Kind)
	}
	if want := []string{"i-aaa", "i-bbb", "i-ddd"}; !slices.Equal(d.Instances, want) {
		t.Errorf("instances %v, want %v", d.Instances, want)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "node c") {
		t.Errorf("warnings %q: want one about node c's providerID", d.Warnings)
	}
	if !slices.Equal(d.SourceCIDRs, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}) {
		t.Errorf("source CIDRs %v, want everyone", d.SourceCIDRs)
	}
	if d.Tags[clusterTag("c1")] != "owned" || d.Tags[tagServiceUID] != "uid-svc" || d.Tags[tagServiceName] != "default/svc" {
		t.Errorf("tags %v", d.Tags)
	}

	optsOf(lb).TargetNodeLabels = map[string]string{"pool": "edge"}
	lb.Internal = true
	d2, _ := modelProvider(NLB).desired(lb)
	if !slices.Equal(d2.Instances, []string{"i-aaa"}) {
		t.Errorf("target-node-labels pool=edge: instances %v, want [i-aaa]", d2.Instances)
	}
	if d2.Scheme != schemeInternal || d2.Name == d.Name {
		t.Errorf("internal: scheme %s, name %s (internet-facing %s): a scheme change must change the name", d2.Scheme, d2.Name, d.Name)
	}
	if len(d.Name) > 32 || len(d.NLB.Listeners[0].TG.Name) > 32 {
		t.Errorf("names longer than 32 characters: %s %s", d.Name, d.NLB.Listeners[0].TG.Name)
	}
}

func TestNLBNodeRules(t *testing.T) {
	lb := testLB("svc", nil)
	optsOf(lb).Kind = NLB
	lb.Ports = []providers.Port{{Protocol: providers.UDP, Port: 53, NodePort: 30053}, {Protocol: providers.TCP, Port: 53, NodePort: 30053}}
	lb.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.18.100.0/24"), netip.MustParsePrefix("2001:db8::/64")}
	d, err := modelProvider(Classic).desired(lb)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range nlbNodeRules(d, []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")}) {
		got = append(got, r.key()+" "+r.Purpose)
	}
	want := []string{
		"tcp/30053/30053/198.18.100.0/24 client", "tcp/30053/30053/2001:db8::/64 client",
		"udp/30053/30053/198.18.100.0/24 client", "udp/30053/30053/2001:db8::/64 client",
		"tcp/30053/30053/198.18.1.0/24 health",
		"icmp/3/4/198.18.100.0/24 mtu", "icmpv6/2/0/2001:db8::/64 mtu",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules:\n got %q\nwant %q", got, want)
	}
}

func TestPickSubnets(t *testing.T) {
	sn := func(id, az string, tags ...string) subnet {
		m := map[string]string{}
		for _, k := range tags {
			m[k] = "1"
		}
		return subnet{ID: id, AZ: az, Tags: m}
	}
	all := []subnet{
		sn("subnet-1", "a", tagRoleInternalELB),
		sn("subnet-2", "a", tagRoleELB),
		sn("subnet-3", "b"),
		sn("subnet-4", "b", clusterTag("c1")),
		sn("subnet-5", "c", clusterTag("other"), tagRoleELB),
		sn("subnet-6", "d", tagRoleInternalELB),
	}
	ids := func(s []subnet) string { return strings.Join(subnetIDs(s), ",") }
	if got := ids(pickSubnets(all, "c1", schemeInternetFacing)); got != "subnet-2,subnet-4" {
		t.Errorf("internet-facing: %s", got)
	}
	if got := ids(pickSubnets(all, "c1", schemeInternal)); got != "subnet-1,subnet-4,subnet-6" {
		t.Errorf("internal: %s", got)
	}
}

func TestInstanceID(t *testing.T) {
	for in, want := range map[string]string{
		"aws:///us-east-1a/i-0abc": "i-0abc", "aws://us-east-1a/i-0abc": "i-0abc", "i-0abc": "i-0abc",
		"gce://p/z/n": "", "aws:///us-east-1a/": "", "": "",
	} {
		got, ok := instanceID(in)
		if got != want || ok != (want != "") {
			t.Errorf("instanceID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestNames(t *testing.T) {
	ref := providers.Ref{Namespace: "default", Name: "A very long Service name!", UID: "u1"}
	n := lbName("c1", ref, NLB, schemeInternal)
	if len(n) != 32 || !strings.HasPrefix(n, "k8s-averylon-") {
		t.Errorf("lbName = %q", n)
	}
	if n == lbName("c1", ref, NLB, schemeInternetFacing) || n == lbName("c2", ref, NLB, schemeInternal) {
		t.Errorf("names must differ by scheme and cluster")
	}
	if d := ruleDescription("u1", n, "client"); ruleOwner(d) != "u1" || ruleLB(d) != n {
		t.Errorf("rule description %q does not round-trip", d)
	}
}

// testLB is a one-port Classic Service on nodes, the base the tests mutate.
func testLB(name string, nodes []providers.Node) *providers.LoadBalancer {
	return &providers.LoadBalancer{
		Ref:        providers.Ref{Namespace: "default", Name: name, UID: "uid-" + name},
		IPFamilies: []providers.IPFamily{providers.IPv4},
		Ports:      []providers.Port{{Name: "http", Protocol: providers.TCP, Port: 80, NodePort: 30080}},
		Nodes:      nodes,
	}
}

// optsOf returns lb's AWS options for a test to edit, creating them when lb has none.
func optsOf(lb *providers.LoadBalancer) *ServiceOptions {
	if o, ok := lb.Options.(*ServiceOptions); ok {
		return o
	}
	o := &ServiceOptions{}
	if v, ok := lb.Options.(ServiceOptions); ok {
		*o = v
	}
	lb.Options = o
	return o
}
