package providertest

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/portico-lb/portico/providers"
)

// Options describe what the provider under test needs from its environment. The zero value
// suits an in-memory provider.
type Options struct {
	// Nodes returns the backend nodes load balancers may target. A real provider returns nodes
	// it can register (instances the cloud knows); the suite only ever uses subsets of them.
	// Default: three nodes with lab addresses (DefaultNodes).
	Nodes func(t *testing.T) []providers.Node
	// Hostnames: the provider reports a DNS name rather than one IP per family, as cloud load
	// balancers do.
	Hostnames bool
	// FamilySets are the spec.ipFamilies combinations the ingress subtest requests. Default:
	// each family of Capabilities().IPFamilies alone, then both together when it has both
	// (nil IPFamilies meaning IPv4 and IPv6). Other subtests request the first family alone.
	FamilySets [][]providers.IPFamily
	// RequestableIP is an address the provider can hand out on request. When set and the
	// provider has Capabilities().RequestedIPs, a subtest checks it is honoured.
	RequestableIP netip.Addr
	// Timeout bounds each subtest's provider calls, and each cleanup Delete. Default 30s.
	Timeout time.Duration
	// Namespace of the Refs the suite creates. Default "providertest". UIDs are random, so
	// runs sharing an account do not collide.
	Namespace string
	// Class and Options are set on every load balancer the suite builds, e.g. to select an AWS
	// load-balancer kind (aws.ServiceOptions{Kind: aws.NLB}).
	Class   string
	Options providers.ServiceOptions
	// Concurrency is the number of Refs ensured at once by the concurrency subtest. Default 20.
	Concurrency int
	// Parallel runs the subtests in parallel with each other.
	Parallel bool
	// Check, if set, is called after every successful Ensure with the desired model and the
	// status. It lets a provider's test verify the real resources (listeners, target groups,
	// announced VIPs) match lb, which the suite cannot see through the interface.
	Check func(t *testing.T, p providers.Provider, lb *providers.LoadBalancer, st providers.Status)
}

// DefaultNodes returns the nodes used when Options.Nodes is nil: three nodes with lab
// addresses (198.19.0.11-13 from RFC 2544, 2001:db8::11-13 from RFC 3849), sorted by name.
func DefaultNodes() []providers.Node {
	var nodes []providers.Node
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		nodes = append(nodes, providers.Node{
			Name:       name,
			ProviderID: "providertest:///" + name,
			Addresses: []netip.Addr{
				netip.AddrFrom4([4]byte{198, 19, 0, byte(11 + i)}),
				netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", 11+i)),
			},
			Labels: map[string]string{"kubernetes.io/hostname": name},
		})
	}
	return nodes
}

// Run runs the conformance suite as subtests of t. newProvider is called once per subtest
// (after t.Parallel when Options.Parallel is set) and must return a provider ready for use;
// it may register its own t.Cleanup.
func Run(t *testing.T, newProvider func(t *testing.T) providers.Provider, opts Options) {
	t.Helper()
	if opts.Nodes == nil {
		opts.Nodes = func(*testing.T) []providers.Node { return DefaultNodes() }
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Namespace == "" {
		opts.Namespace = "providertest"
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 20
	}
	s := &suite{newProvider: newProvider, opts: opts}

	t.Run("IngressPerFamily", s.ingressPerFamily)
	t.Run("EnsureIsIdempotent", s.idempotent)
	t.Run("GetAfterEnsure", s.getAfterEnsure)
	t.Run("PortUpdate", s.portUpdate)
	t.Run("NodeSetChange", s.nodeSetChange)
	t.Run("DeleteThenGet", s.deleteThenGet)
	t.Run("DeleteTwice", s.deleteTwice)
	t.Run("DeleteNeverCreated", s.deleteNeverCreated)
	t.Run("DistinctAddresses", s.distinctAddresses)
	t.Run("SessionAffinity", s.sessionAffinity)
	t.Run("NodePortZero", s.nodePortZero)
	t.Run("MixedProtocols", s.mixedProtocols)
	t.Run("UnsupportedProtocol", s.unsupportedProtocol)
	t.Run("RequestedIP", s.requestedIP)
	t.Run("ConcurrentEnsure", s.concurrentEnsure)
}

type suite struct {
	newProvider func(t *testing.T) providers.Provider
	opts        Options
}
