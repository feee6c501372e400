package nftables

import "github.com/portico-lb/portico/nodeproxy/rules"

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
	chainFilterInput    = "filter-input"
	chainFilterForward  = "filter-forward"

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
)

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

// elemMaps lists the element maps a port contributes to, in a fixed order.
var elemMaps = []string{mapServices, mapNodePorts, mapFirewall, mapNoEndpoints, mapNoEndpointPort}
