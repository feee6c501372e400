package aws

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/portico-lb/portico/annotations"
)

// Rules of the keys that apply to both kinds of load balancer.

func parseType(v string, o *ServiceOptions) []annotations.Problem {
	switch v {
	case "nlb":
		o.Kind = NLB
		return nil
	case "external", "nlb-ip":
		return []annotations.Problem{{Bad: v, Detail: fmt.Sprintf("%q belongs to the AWS Load Balancer Controller, which handles this Service instead of Portico; "+
			`Portico accepts "nlb", or no annotation for a Classic ELB`, v)}}
	}
	return []annotations.Problem{{Bad: v, Detail: `must be "nlb", or remove the annotation for a Classic ELB`}}
}

func parseCrossZone(v string, o *ServiceOptions) []annotations.Problem {
	b, probs := annotations.ParseBool(v)
	if probs == nil {
		o.CrossZone = &b
	}
	return probs
}

func parseTags(v string, o *ServiceOptions) []annotations.Problem {
	tags, probs := annotations.ParseKeyValues(v, func(k, val string) []annotations.Problem {
		var probs []annotations.Problem
		switch {
		case k == "":
			probs = append(probs, annotations.Problem{Bad: k + "=" + val, Detail: "tag key must not be empty; want k=v,k2=v2,keyonly"})
		case utf8.RuneCountInString(k) > maxTagKeyLen:
			probs = append(probs, annotations.Problem{Bad: k, Detail: fmt.Sprintf("tag key must be at most %d characters", maxTagKeyLen)})
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			probs = append(probs, annotations.Problem{Bad: k, Detail: `tag keys starting with "aws:" are reserved by AWS`})
		}
		if utf8.RuneCountInString(val) > maxTagValueLen {
			probs = append(probs, annotations.Problem{Bad: val, Detail: fmt.Sprintf("tag value must be at most %d characters", maxTagValueLen)})
		}
		return probs
	})
	o.AdditionalTags = tags
	return probs
}

func parseSubnets(v string, o *ServiceOptions) []annotations.Problem {
	items, probs := annotations.SplitList(v, "subnet", nil)
	o.Subnets = items
	return probs
}

func parseTargetNodeLabels(v string, o *ServiceOptions) []annotations.Problem {
	labels, probs := annotations.ParseKeyValues(v, func(k, val string) []annotations.Problem {
		var probs []annotations.Problem
		for _, msg := range content.IsLabelKey(k) {
			probs = append(probs, annotations.Problem{Bad: k, Detail: "invalid label key: " + msg})
		}
		for _, msg := range content.IsLabelValue(val) {
			probs = append(probs, annotations.Problem{Bad: val, Detail: "invalid label value: " + msg})
		}
		return probs
	})
	o.TargetNodeLabels = labels
	return probs
}

func parseSSLCert(v string, o *ServiceOptions) []annotations.Problem {
	const want = "must be an ACM or IAM certificate ARN such as arn:aws:acm:us-east-1:123456789012:certificate/<id>"
	parts := strings.SplitN(v, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || (parts[2] != "acm" && parts[2] != "iam") ||
		parts[5] == "" || strings.IndexFunc(v, unicode.IsSpace) >= 0 {
		return []annotations.Problem{{Bad: v, Detail: want}}
	}
	o.SSLCert = v
	return nil
}

func parseSSLPorts(v string, o *ServiceOptions) []annotations.Problem {
	const want = `want "*" or a comma-separated list of port numbers (1-65535) and port names`
	items, probs := annotations.SplitList(v, "port", func(item string) string {
		if n, err := strconv.Atoi(item); err == nil {
			return strconv.Itoa(n)
		}
		return item
	})
	if len(items) == 0 && probs == nil {
		return []annotations.Problem{{Bad: v, Detail: "must not be empty; " + want}}
	}
	var out []string
	for _, item := range items {
		if item == "*" {
			if len(items) > 1 {
				probs = append(probs, annotations.Problem{Bad: v, Detail: `"*" means every port and cannot be combined with other ports`})
				continue
			}
			out = append(out, item)
			continue
		}
		if n, err := strconv.Atoi(item); err == nil {
			if n < 1 || n > 65535 {
				probs = append(probs, annotations.Problem{Bad: item, Detail: "port number out of range; " + want})
				continue
			}
			out = append(out, strconv.Itoa(n))
			continue
		}
		if msgs := validation.IsValidPortName(item); len(msgs) > 0 {
			probs = append(probs, annotations.Problem{Bad: item, Detail: "not a port number or port name (" + strings.Join(msgs, "; ") + "); " + want})
			continue
		}
		out = append(out, item)
	}
	o.SSLPorts = out
	return probs
}

func parseSSLNegotiationPolicy(v string, o *ServiceOptions) []annotations.Problem {
	if v == "" || len(v) > 128 || strings.IndexFunc(v, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) >= 0 {
		return []annotations.Problem{{Bad: v, Detail: "must be a predefined policy name such as ELBSecurityPolicy-TLS13-1-2-2021-06 (letters, digits, '-', '_', '.')"}}
	}
	o.SSLNegotiationPolicy = v
	return nil
}

func parseBackendProtocol(v string, o *ServiceOptions) []annotations.Problem {
	p := strings.ToLower(v)
	switch p {
	case "http", "https", "ssl", "tcp":
		o.BackendProtocol = p
		return nil
	}
	return []annotations.Problem{{Bad: v, Detail: `must be one of "http", "https", "ssl", "tcp"`}}
}

func parseAccessLogEnabled(v string, o *ServiceOptions) []annotations.Problem {
	b, probs := annotations.ParseBool(v)
	if probs == nil {
		o.AccessLog.Enabled = &b
	}
	return probs
}

func parseAccessLogBucket(v string, o *ServiceOptions) []annotations.Problem {
	ok := len(v) >= 3 && len(v) <= 63 && strings.IndexFunc(v, func(r rune) bool {
		return !(r == '.' || r == '-' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'))
	}) < 0 && strings.Trim(v[:1]+v[len(v)-1:], "abcdefghijklmnopqrstuvwxyz0123456789") == ""
	if !ok {
		return []annotations.Problem{{Bad: v, Detail: "must be an S3 bucket name: 3-63 characters of lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"}}
	}
	o.AccessLog.Bucket = v
	return nil
}

func parseAccessLogPrefix(v string, o *ServiceOptions) []annotations.Problem {
	if v == "" || len(v) > 512 || strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/") ||
		strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return []annotations.Problem{{Bad: v, Detail: "must be a key prefix of 1-512 characters without whitespace and without leading or trailing '/'"}}
	}
	o.AccessLog.Prefix = v
	return nil
}

func parseManageBackendSGRules(v string, o *ServiceOptions) []annotations.Problem {
	b, probs := annotations.ParseBool(v)
	if probs == nil {
		o.ManageBackendSecurityGroupRules = &b
	}
	return probs
}
