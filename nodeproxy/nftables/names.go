package nftables

import (
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/portico-lb/portico/nodeproxy/rules"
)

// TableName is the one table the agent owns in each family (ip and ip6). Every chain, set and
// map the agent creates lives in it; the agent never reads or writes any other table, and
// --cleanup deletes exactly these two.
const TableName = "portico"

// Static chains: base chains hooked into netfilter, and the fixed regular chains they use.
const (
	chainNATPrerouting  = "nat-prerouting"  // nat prerouting, dstnat: jump services
	chainNATOutput      = "nat-output"      // nat output, dstnat: jump services
	chainNATPostrouting = "nat-postrouting" // nat postrouting, srcnat: jump masquerading
	chainFilterPre      = "filter-prerouting"
	chainFilterOutput   = "filter-output"
	// filter-output-post-dnat: the node's own new connections, after DNAT, through no-endpoints.
	chainFilterOutputPost = "filter-output-post-dnat"
	chainFilterInput      = "filter-input"
	chainFilterForward    = "filter-forward"

	chainServices     = "services"     // dispatch by destination, then NodePorts
	chainNodePorts    = "nodeports"    // dispatch NodePorts by protocol . port
	chainMasquerading = "masquerading" // hairpin and marked packets
	chainMarkOff      = "mark-offcluster"
	chainMark         = "mark-for-masquerade"
	chainNoEndpoints  = "no-endpoints" // rejects and drops of new connections
	chainReject       = "reject"
)

// Named sets and maps.
const (
	mapServices       = "service-ips"           // address . proto . port : goto internal/external chain
	mapNodePorts      = "service-nodeports"     // proto . port : goto external chain
	mapFirewall       = "firewall-ips"          // address . proto . port : goto firewall chain
	mapNoEndpoints    = "no-endpoint-services"  // address . proto . port : goto reject | drop
	mapNoEndpointPort = "no-endpoint-nodeports" // proto . port : goto reject | drop
	setHairpin        = "hairpin"               // endpoint . endpoint of local endpoints
	// mapEndpoints (the prefix of endpointShards maps: endpoints-00 to endpoints-ff) holds the
	// endpoints of every balancing chain, each chain in its own range of keys of one shard
	// (by a hash of the chain's name): base + index : endpoint address . port. A chain picks
	// one with numgen random mod N offset base; a change of endpoints that fits the range is a
	// change of elements only, which the kernel commits without
	// re-validating the table's jumps (a rule change re-validates them all), and one named map
	// instead of an anonymous map per chain keeps a full sync linear (the kernel resolves each
	// new anonymous set against the whole transaction). The shards bound another cost of the
	// kernel: each element added to a map is checked against every rule using the map, and
	// each rule starting to use it against every element (one map made a full sync at 10,000
	// Services x 10 take 28-95 s).
	mapEndpoints = "endpoints"
)

// endpointShards is the number of endpoints maps. Each element added to a map is checked against
// every rule using it (rules / shards), and each rule finds its map by name in a list of the
// table's sets (shards): at 10,000 Services x 10, the kernel's share of a full sync (perf,
// nfnetlink_rcv_batch) was about 1.2 s of CPU with 64 shards, 1.0 s with 1,024 and 0.45 s with 256.
const endpointShards = 256

// endpointMaps are the endpoints maps' names.
var endpointMaps = func() []string {
	out := make([]string, endpointShards)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02x", mapEndpoints, i)
	}
	return out
}()

// endpointMapIndex is the shard of each endpoints map, by name.
var endpointMapIndex = func() map[string]int {
	out := make(map[string]int, endpointShards)
	for i, m := range endpointMaps {
		out[m] = i
	}
	return out
}()

// endpointShard is the shard of the endpoints maps that holds chain's endpoints.
func endpointShard(chain string) int { return int(crc32.ChecksumIEEE([]byte(chain)) % endpointShards) }

// isEndpointMap reports whether the named map is one of the endpoints maps.
func isEndpointMap(name string) bool { return strings.HasPrefix(name, mapEndpoints+"-") }

// Per service port chains are named kind-namespace/name/protocol/port (the port's name, left out
// when empty), which nft(8) prints and reads without quotes.
const (
	kindInternal = "int"  // the ClusterIP
	kindExternal = "ext"  // externalIPs, LoadBalancer IPs, the NodePort
	kindCluster  = "clu"  // cluster-wide endpoints of an externalTrafficPolicy: Local port
	kindFirewall = "fw"   // loadBalancerSourceRanges
	verdictDrop  = "drop" // an element verdict that is not a goto
)

func portChain(kind string, sp *rules.ServicePort) string {
	name := kind + "-" + sp.Namespace + "/" + sp.Name + "/" + sp.Protocol
	if sp.PortName != "" {
		name += "/" + sp.PortName
	}
	return name
}

// sharedMaps are the maps whose keys several ports may claim (claim); the keys of the endpoints
// maps belong to one port each.
var sharedMaps = []string{mapServices, mapNodePorts, mapFirewall, mapNoEndpoints, mapNoEndpointPort}

// elemMaps lists the element maps a port contributes to, in a fixed order.
var elemMaps = append(append([]string{}, sharedMaps...), endpointMaps...)
