// Package serviceports turns a Service and its EndpointSlices into the rules.ServicePort values
// of one IP family that portico-agent programs on its node: the ClusterIP, externalIPs and
// LoadBalancer IPs of the family (ipMode Proxy excluded), the NodePort and healthCheckNodePort,
// the traffic policies, the endpoints with their ready/serving/terminating conditions and
// whether they run here, and topology hints (which ready endpoints serve this node), as
// kube-proxy does. Source ranges and the affinity timeout come from package servicerules,
// so the agent applies exactly the rules the controller accepts. The agent's externalIPs policy
// (config.ExternalIPPolicy: allow, deny or an allow-list of CIDRs) is applied here too, once
// for every proxy mode: an externalIP it refuses is in no ServicePort, so neither the iptables
// nor the nftables proxier writes a rule for it (RefusedExternalIPs names those addresses for
// the agent's Event). It is pure.
package serviceports
