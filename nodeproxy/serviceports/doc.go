// Package serviceports turns a Service and its EndpointSlices into the rules.ServicePort values
// of one IP family that portico-agent programs on its node: the ClusterIP, externalIPs and
// LoadBalancer IPs of the family (ipMode Proxy excluded), the NodePort and healthCheckNodePort,
// the traffic policies, the endpoints with their ready/serving/terminating conditions and
// whether they run here, and topology hints (which ready endpoints serve this node), as
// kube-proxy does. Source ranges and the affinity timeout come from package servicerules,
// so the agent applies exactly the rules the controller accepts. It is pure.
package serviceports
