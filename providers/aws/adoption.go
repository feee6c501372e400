package aws

import (
	"github.com/portico-lb/portico/providers"
)

// Adoption of cloud-provider-aws's load balancers. A cluster switching from cloud-provider-aws
// to Portico keeps every Classic ELB and NLB it has: while a Service's status names
// cloud-provider-aws's load balancer ("a" + the UID, adoptedName) of the kind and scheme the
// Service asks for, Portico uses that name instead of its own, finds the load balancer tagged
// by cloud-provider-aws for this Service and cluster (kubernetes.io/cluster/<cluster> and
// kubernetes.io/service-name), adds its ownership tags and from then on converges it as its
// own: listeners, health check, attributes, target groups (an NLB's are replaced by Portico's
// and cloud-provider-aws's deleted once no listener uses them), security groups. No load
// balancer is created or deleted, so the DNS name and the Service's status stay. A change of
// kind or scheme later replaces it as any other (provider.go).

// tagLegacyCluster is cloud-provider-aws's older cluster tag.
const tagLegacyCluster = "KubernetesCluster"

// adoptable reports whether the load balancer named name, with tags, is cloud-provider-aws's
// for ref in this cluster and not yet Portico's.
func adoptable(name string, tags map[string]string, cluster string, ref providers.Ref) bool {
	_, tagged := tags[clusterTag(cluster)]
	tagged = tagged || tags[tagLegacyCluster] == cluster
	return name == cloudProviderName(ref) && tagged &&
		tags[tagServiceName] == ref.Namespace+"/"+ref.Name && tags[tagServiceUID] == ""
}
