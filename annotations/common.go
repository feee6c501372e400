package annotations

import (
	"fmt"
	"net/netip"
)

// The provider-neutral section: the keys every provider honours, parsed into Spec by Parse.
// cloud-provider-aws's internal switch and the AWS Load Balancer Controller's scheme are read
// here too, because they set the common Internal.

// commonRules are the keys Parse reads, in the order conflicts between them are judged.
var commonRules = []Rule[Spec]{
	{Internal, parseInternal},
	{SourceRanges, parseSourceRanges},
	{LoadBalancerIPs, parseLoadBalancerIPs},
	{AWSLoadBalancerInternal, parseAWSInternal},
	{AWSLoadBalancerScheme, parseAWSScheme},
}

// checkInternalAgrees: different keys that set Internal must agree; the first in this order wins.
func checkInternalAgrees(spec *Spec, winners map[string]keyWinner[Spec], errs *keyedErrors) {
	var first *keyWinner[Spec]
	for _, key := range []string{Internal, AWSLoadBalancerInternal, AWSLoadBalancerScheme} {
		w, ok := winners[key]
		if !ok {
			continue
		}
		if first == nil {
			first = &w
			continue
		}
		if w.parsed.Internal != first.parsed.Internal {
			errs.add(w.name, w.value, fmt.Sprintf("means internal=%t, which conflicts with %s=%q; set one of them, or make them agree",
				w.parsed.Internal, first.name, first.value))
			spec.Internal = first.parsed.Internal
		}
	}
}

func parseInternal(v string, s *Spec) []Problem {
	b, probs := ParseBool(v)
	s.Internal = b
	return probs
}

func parseSourceRanges(v string, s *Spec) []Problem {
	const want = "want a comma-separated list of CIDRs such as 10.0.0.0/8 or 2001:db8::/32"
	canon := func(item string) string {
		if p, err := netip.ParsePrefix(item); err == nil {
			return p.Masked().String()
		}
		return item
	}
	items, probs := SplitList(v, "CIDR", canon)
	var out []netip.Prefix
	for _, item := range items {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			if a, aerr := netip.ParseAddr(item); aerr == nil {
				probs = append(probs, Problem{item, fmt.Sprintf("a bare IP is not a CIDR; write %s/%d for a single address", a, a.BitLen())})
			} else {
				probs = append(probs, Problem{item, "not a CIDR; " + want})
			}
			continue
		}
		out = append(out, p.Masked())
	}
	s.SourceRanges = out
	return probs
}

func parseLoadBalancerIPs(v string, s *Spec) []Problem {
	const want = "want a comma-separated list of IP addresses such as 198.18.128.10, 2001:db8::10"
	canon := func(item string) string {
		if a, err := netip.ParseAddr(item); err == nil {
			return a.String()
		}
		return item
	}
	items, probs := SplitList(v, "address", canon)
	var out []netip.Addr
	for _, item := range items {
		a, err := netip.ParseAddr(item)
		switch {
		case err != nil:
			if _, perr := netip.ParsePrefix(item); perr == nil {
				probs = append(probs, Problem{item, "a CIDR is not an address; " + want})
			} else {
				probs = append(probs, Problem{item, "not an IP address; " + want})
			}
		case a.Zone() != "":
			probs = append(probs, Problem{item, "an address with a zone is not allowed; " + want})
		case a.Is4In6():
			probs = append(probs, Problem{item, fmt.Sprintf("an IPv4-mapped IPv6 address is not allowed; write %s", a.Unmap())})
		default:
			out = append(out, a)
		}
	}
	s.RequestedIPs = out
	return probs
}

func parseAWSInternal(v string, s *Spec) []Problem {
	// cloud-provider-aws: any non-empty value other than "false" means internal.
	s.Internal = v != "" && v != "false"
	return nil
}

func parseAWSScheme(v string, s *Spec) []Problem {
	switch v {
	case "internal":
		s.Internal = true
		return nil
	case "internet-facing":
		s.Internal = false
		return nil
	}
	return []Problem{{v, `must be "internal" or "internet-facing"`}}
}
