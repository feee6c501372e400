package aws

import (
	"strings"

	"github.com/portico-lb/portico/annotations"
)

// Rules of the keys that apply to Classic ELBs only.

func parseIdleTimeout(v string, o *ServiceOptions) []annotations.Problem {
	d, probs := annotations.ParseSeconds(v, 1, 4000)
	o.ConnectionIdleTimeout = d
	return probs
}

func parseProxyProtocol(v string, o *ServiceOptions) []annotations.Problem {
	if v != "*" {
		return []annotations.Problem{{Bad: v, Detail: `must be "*" (PROXY protocol on every backend); remove the annotation to turn it off`}}
	}
	o.ProxyProtocol = true
	return nil
}

func parseDrainingEnabled(v string, o *ServiceOptions) []annotations.Problem {
	b, probs := annotations.ParseBool(v)
	if probs == nil {
		o.ConnectionDraining = &b
	}
	return probs
}

func parseDrainingTimeout(v string, o *ServiceOptions) []annotations.Problem {
	d, probs := annotations.ParseSeconds(v, 1, 3600)
	o.ConnectionDrainingTimeout = d
	return probs
}

// parseGroupIDs parses a list of security group IDs.
func parseGroupIDs(v string) ([]string, []annotations.Problem) {
	items, probs := annotations.SplitList(v, "security group", nil)
	var out []string
	for _, item := range items {
		rest, ok := strings.CutPrefix(item, "sg-")
		if !ok || rest == "" || strings.Trim(rest, "0123456789abcdef") != "" {
			probs = append(probs, annotations.Problem{Bad: item, Detail: "must be a security group ID such as sg-0123456789abcdef0"})
			continue
		}
		out = append(out, item)
	}
	if len(items) == 0 && probs == nil {
		probs = append(probs, annotations.Problem{Bad: v, Detail: "must list at least one security group ID; remove the annotation for the default"})
	}
	return out, probs
}

func parseSecurityGroups(v string, o *ServiceOptions) []annotations.Problem {
	ids, probs := parseGroupIDs(v)
	o.SecurityGroups = ids
	return probs
}

func parseExtraSecurityGroups(v string, o *ServiceOptions) []annotations.Problem {
	ids, probs := parseGroupIDs(v)
	o.ExtraSecurityGroups = ids
	return probs
}

func parseAccessLogEmitInterval(v string, o *ServiceOptions) []annotations.Problem {
	if v != "5" && v != "60" {
		return []annotations.Problem{{Bad: v, Detail: "must be 5 or 60 (minutes)"}}
	}
	n := int32(5)
	if v == "60" {
		n = 60
	}
	o.AccessLog.EmitInterval = &n
	return nil
}
