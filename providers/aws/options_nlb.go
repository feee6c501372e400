package aws

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/portico-lb/portico/annotations"
)

// Rules of the keys that apply to NLBs only.

// targetGroupAttributes are the NLB target-group attributes the annotation may set, each with
// its value check.
var targetGroupAttributes = map[string]func(string) string{
	"proxy_protocol_v2.enabled":                           checkBoolAttr,
	"preserve_client_ip.enabled":                          checkBoolAttr,
	"deregistration_delay.connection_termination.enabled": checkBoolAttr,
	"stickiness.enabled":                                  checkBoolAttr,
	"deregistration_delay.timeout_seconds": func(v string) string {
		if _, probs := annotations.ParseInt(v, 0, 3600, "number of seconds"); probs != nil {
			return probs[0].Detail
		}
		return ""
	},
	"stickiness.type": func(v string) string {
		if v != "source_ip" {
			return `must be "source_ip" (the only NLB stickiness type)`
		}
		return ""
	},
}

func checkBoolAttr(v string) string {
	if v != "true" && v != "false" {
		return annotations.WantBool
	}
	return ""
}

func parseTargetGroupAttributes(v string, o *ServiceOptions) []annotations.Problem {
	attrs, probs := annotations.ParseKeyValues(v, func(k, val string) []annotations.Problem {
		check, ok := targetGroupAttributes[k]
		if !ok {
			return []annotations.Problem{{Bad: k, Detail: "unknown target-group attribute; known: " + strings.Join(slices.Sorted(maps.Keys(targetGroupAttributes)), ", ")}}
		}
		if msg := check(val); msg != "" {
			return []annotations.Problem{{Bad: val, Detail: k + ": " + msg}}
		}
		return nil
	})
	if len(attrs) == 0 && probs == nil {
		probs = append(probs, annotations.Problem{Bad: v, Detail: "must list at least one attribute k=v; remove the annotation for the defaults"})
	}
	o.TargetGroupAttributes = attrs
	return probs
}

func parseEIPAllocations(v string, o *ServiceOptions) []annotations.Problem {
	items, probs := annotations.SplitList(v, "allocation ID", nil)
	var out []string
	for _, item := range items {
		rest, ok := strings.CutPrefix(item, "eipalloc-")
		if !ok || rest == "" || strings.Trim(rest, "0123456789abcdef") != "" {
			probs = append(probs, annotations.Problem{Bad: item, Detail: "must be an Elastic IP allocation ID such as eipalloc-0123456789abcdef0"})
			continue
		}
		out = append(out, item)
	}
	if len(items) == 0 && probs == nil {
		probs = append(probs, annotations.Problem{Bad: v, Detail: "must list at least one allocation ID; remove the annotation for AWS-assigned addresses"})
	}
	o.EIPAllocations = out
	return probs
}

func parsePrivateIPv4Addresses(v string, o *ServiceOptions) []annotations.Problem {
	items, probs := annotations.SplitList(v, "address", nil)
	var out []netip.Addr
	for _, item := range items {
		a, err := netip.ParseAddr(item)
		if err != nil || !a.Is4() {
			probs = append(probs, annotations.Problem{Bad: item, Detail: "must be an IPv4 address such as 10.0.1.10"})
			continue
		}
		out = append(out, a)
	}
	if len(items) == 0 && probs == nil {
		probs = append(probs, annotations.Problem{Bad: v, Detail: "must list at least one address; remove the annotation for AWS-assigned addresses"})
	}
	o.PrivateIPv4Addresses = out
	return probs
}

func parseNLBTargetType(v string, o *ServiceOptions) []annotations.Problem {
	switch v {
	case "instance":
		o.NLBTargetType = v
		return nil
	case "ip":
		return []annotations.Problem{{Bad: v, Detail: `"ip" targets (pods registered directly) belong to the AWS Load Balancer Controller; Portico registers instances on node ports: use "instance" or remove the annotation`}}
	}
	return []annotations.Problem{{Bad: v, Detail: `must be "instance"`}}
}

func parseIPAddressType(v string, o *ServiceOptions) []annotations.Problem {
	if v != "ipv4" && v != "dualstack" {
		return []annotations.Problem{{Bad: v, Detail: `must be "ipv4" or "dualstack"`}}
	}
	o.IPAddressType = v
	return nil
}

func parseALPNPolicy(v string, o *ServiceOptions) []annotations.Problem {
	switch v {
	case "HTTP1Only", "HTTP2Only", "HTTP2Optional", "HTTP2Preferred", "None":
		o.ALPNPolicy = v
		return nil
	}
	return []annotations.Problem{{Bad: v, Detail: `must be one of "HTTP1Only", "HTTP2Only", "HTTP2Optional", "HTTP2Preferred", "None"`}}
}
