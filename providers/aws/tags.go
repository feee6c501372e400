package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"github.com/portico-lb/portico/providers"
)

// Ownership. Everything the provider creates carries:
//
//	kubernetes.io/cluster/<cluster> = owned   (as cloud-provider-aws; the cluster owns it)
//	kubernetes.io/service-name      = <namespace>/<name>
//	portico-lb.io/service-uid       = <uid>   (the Service; two Services reusing a name differ)
//
// plus the configured extra tags and the Service's additional-resource-tags. A load balancer
// created to replace another one (a scheme or kind change) also carries
//
//	portico-lb.io/replaces = <classic|nlb>/<name>
//
// until the replaced one is gone, and every load balancer, once converged,
//
//	portico-lb.io/applied = <hash of the desired model last converged>   (applied.go)
//
// Node security-group rules cannot carry tags everywhere, so
// they are owned through their description: "portico/<uid>/<lb-name>/<purpose>" (ruleDescription).
// The cluster's shared backend security group (backendsg.go) belongs to no Service: it carries
// the cluster tag and portico-lb.io/resource=backend-sg, and its node rule is described
// "portico/backend/<cluster hash>/traffic".
// Nothing without these marks is ever modified or deleted, except the node security groups'
// rules the provider added.
const (
	tagClusterPrefix = "kubernetes.io/cluster/"
	tagOwned         = "owned"
	tagServiceName   = "kubernetes.io/service-name"
	tagServiceUID    = "portico-lb.io/service-uid"
	tagReplaces      = "portico-lb.io/replaces"
	tagApplied       = "portico-lb.io/applied"
	rulePrefix       = "portico/"
)

func clusterTag(cluster string) string { return tagClusterPrefix + cluster }

// ownerTags are the tags that make a resource the provider's for ref.
func ownerTags(cluster string, ref providers.Ref) map[string]string {
	return map[string]string{
		clusterTag(cluster): tagOwned,
		tagServiceName:      ref.Namespace + "/" + ref.Name,
		tagServiceUID:       ref.UID,
	}
}

// resourceTags are every tag of a resource created for ref: extra tags first, so that the
// ownership tags always win.
func resourceTags(cluster string, ref providers.Ref, extra map[string]string, spec ServiceOptions) map[string]string {
	out := map[string]string{}
	maps.Copy(out, extra)
	maps.Copy(out, spec.AdditionalTags)
	maps.Copy(out, ownerTags(cluster, ref))
	return out
}

// ownedBy reports whether tags mark a resource as created by this cluster for the Service uid.
func ownedBy(tags map[string]string, cluster, uid string) bool {
	return tags[clusterTag(cluster)] == tagOwned && tags[tagServiceUID] == uid
}

// ruleDescription marks a security-group rule as the provider's, for the Service uid and the
// load balancer lbName (two load balancers of one Service coexist during a replacement).
func ruleDescription(uid, lbName, purpose string) string {
	return rulePrefix + uid + "/" + lbName + "/" + purpose
}

// ruleLB returns the load balancer name of a rule description the provider wrote, or "".
func ruleLB(desc string) string {
	parts := strings.Split(desc, "/")
	if len(parts) != 4 || parts[0]+"/" != rulePrefix {
		return ""
	}
	return parts[2]
}

// ruleOwner returns the Service uid of a rule description the provider wrote, or "".
func ruleOwner(desc string) string {
	rest, ok := strings.CutPrefix(desc, rulePrefix)
	if !ok {
		return ""
	}
	uid, _, _ := strings.Cut(rest, "/")
	return uid
}

// Names. AWS load balancer and target group names are unique per account and region, at most 32
// characters of [a-zA-Z0-9-]. The name holds a hash of everything AWS cannot change in place, so
// that a replacement never collides with the resource it replaces, and a recreated resource after
// a crash gets the same name (found, not duplicated).

// lbName is the load balancer name for a Service, kind and scheme.
func lbName(cluster string, ref providers.Ref, kind Kind, scheme string) string {
	return shortName("k8s", ref.Name, hash(cluster, ref.UID, string(kind), scheme))
}

// targetGroupName is the name of an NLB target group: it changes with what a target group
// cannot change (protocol, port) and with the load balancer it belongs to.
func targetGroupName(lbName string, protocol string, nodePort int32, port int32) string {
	return shortName("k8s", "tg", hash(lbName, protocol, itoa(nodePort), itoa(port)))
}

// securityGroupName is the name of a Classic ELB's own security group i: the first is
// k8s-elb-<lb>, further ones (a source-range list longer than one group holds) k8s-elb-<lb>-<i>.
func securityGroupName(lbName string, i int) string {
	if i == 0 {
		return "k8s-elb-" + lbName
	}
	return fmt.Sprintf("k8s-elb-%s-%d", lbName, i)
}

func shortName(prefix, readable, h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(readable) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	mid := b.String()
	if len(mid) > 8 {
		mid = mid[:8]
	}
	name := prefix + "-"
	if mid != "" {
		name += mid + "-"
	}
	return name + h[:32-len(name)]
}

func hash(parts ...string) string {
	s := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(s[:])
}
