package rules

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"
)

// Prefix starts the name of every chain the agent owns, in every table and family, and of every
// `-m recent` list it creates. Nothing else the agent touches carries it, and the agent never
// touches a chain without it (the jump rules in the built-in chains are recognised by
// JumpComment instead).
const Prefix = "PTC-"

// JumpComment is the comment on the jump rules the agent keeps in the built-in chains.
const JumpComment = "portico-agent"

// Chains whose names are fixed (see doc.go for the layout).
const (
	// ChainServices is the nat dispatch chain (from PREROUTING and OUTPUT) and the filter chain
	// of rejects, drops and accepts for new connections (from INPUT, FORWARD and OUTPUT).
	ChainServices = Prefix + "SERVICES"
	// ChainNodePorts dispatches NodePort traffic by port range to the PTC-NP-* buckets.
	ChainNodePorts = Prefix + "NODEPORTS"
	// ChainPostrouting masquerades marked and hairpin packets (from POSTROUTING).
	ChainPostrouting = Prefix + "POSTROUTING"
	// ChainForward accepts forwarded packets of known connections and marked packets.
	ChainForward = Prefix + "FORWARD"
	// ChainMarkOffCluster marks packets whose source is outside the cluster CIDRs.
	ChainMarkOffCluster = Prefix + "MARK-OFFCLUSTER"

	bucketPrefix      = Prefix + "SVC-"
	nodePortPrefix    = Prefix + "NP-"
	externalPrefix    = Prefix + "X-"
	clusterPrefix     = Prefix + "C-"
	nodePortBucketLog = 6 // NodePorts are bucketed by port >> 6: 64 ports per chain
)

// Owned reports whether a chain name belongs to the agent.
func Owned(chain string) bool { return strings.HasPrefix(chain, Prefix) }

// bucketChain is the chain holding every destination whose address ends in the byte b.
func bucketChain(b byte) string { return fmt.Sprintf("%s%02X", bucketPrefix, b) }

// bucketOf is the low byte of an address: destinations are spread over 256 chains by it.
func bucketOf(a netip.Addr) byte {
	s := a.AsSlice()
	return s[len(s)-1]
}

func nodePortBucket(port uint16) int { return int(port) >> nodePortBucketLog }

func nodePortChain(bucket int) string { return fmt.Sprintf("%s%d", nodePortPrefix, bucket) }

// portHash is the first 16 characters of the base32 SHA-256 of the service port's key: chain
// names must stay within iptables' 28 characters.
func portHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// externalChain and clusterChain are the two chains an externalTrafficPolicy: Local service port
// needs (the only per-service chains; see doc.go).
func externalChain(key string) string { return externalPrefix + portHash(key) }
func clusterChain(key string) string  { return clusterPrefix + portHash(key) }

// affinityList names the `-m recent` list recording clients sent to one endpoint of one port.
func affinityList(key string, e Endpoint) string {
	return Prefix + portHash(key+"|"+e.String())
}
