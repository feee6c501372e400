package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/portico-lb/portico/providers"
)

// Names of what the provider creates: short enough for AWS's limits, derived from the cluster,
// the Service and what the resource is, so that the same Service always gets the same names and
// a new name means a new resource.

// lbName is the load balancer name for a Service, kind and scheme.
func lbName(cluster string, ref providers.Ref, kind Kind, scheme string) string {
	return shortName("k8s", ref.Name, hash(cluster, ref.UID, string(kind), scheme))
}

// cloudProviderName is the name cloud-provider-aws gives a Service's load balancer of either
// kind: "a" and the UID without dashes, at most 32 characters.
func cloudProviderName(ref providers.Ref) string {
	n := "a" + strings.ReplaceAll(ref.UID, "-", "")
	if len(n) > 32 {
		n = n[:32]
	}
	return n
}

// adoptedName returns cloudProviderName(ref) when one of the Service's status hostnames names
// cloud-provider-aws's load balancer of this kind and scheme: Portico then keeps that load
// balancer (adoption.go) instead of creating its own. A Classic ELB's DNS name is
// "[internal-]<name>-<id>.<region>.elb.amazonaws.com", an NLB's
// "<name>-<id>.elb.<region>.amazonaws.com".
func adoptedName(ref providers.Ref, kind Kind, scheme string, hostnames []string) (string, bool) {
	name := cloudProviderName(ref)
	for _, h := range hostnames {
		label, rest, _ := strings.Cut(h, ".")
		internal := strings.HasPrefix(label, "internal-")
		label = strings.TrimPrefix(label, "internal-")
		// moto leaves out the "-<id>".
		if (label != name && !strings.HasPrefix(label, name+"-")) || internal != (scheme == schemeInternal) {
			continue
		}
		classicForm := strings.HasSuffix(rest, ".elb.amazonaws.com")
		if classicForm == (kind == Classic) {
			return name, true
		}
	}
	return "", false
}

// targetGroupName is the name of an NLB target group: it changes with what a target group
// cannot change (protocol, port) and with the load balancer it belongs to.
func targetGroupName(lbName string, protocol string, nodePort int32, port int32) string {
	return shortName("k8s", "tg", hash(lbName, protocol, itoa(nodePort), itoa(port)))
}

// securityGroupName is the name of a load balancer's own security group i: the first is
// k8s-elb-<lb>, further ones (a source-range list longer than one group holds) k8s-elb-<lb>-<i>.
//
// A load balancer adopted from cloud-provider-aws (its name does not start with "k8s-") gets
// groups named k8s-elb-portico-<lb>: cloud-provider-aws's own group holds k8s-elb-<lb>, with
// rules Portico does not own; attaching Portico's groups detaches it.
func securityGroupName(lbName string, i int) string {
	base := "k8s-elb-" + lbName
	if !strings.HasPrefix(lbName, "k8s-") {
		base = "k8s-elb-portico-" + lbName
	}
	if i == 0 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, i)
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

func kindName(k Kind) string {
	if k == NLB {
		return "NLB"
	}
	return "Classic ELB"
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
