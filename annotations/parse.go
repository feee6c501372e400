package annotations

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// problem is one thing wrong with one annotation value: the offending value (the whole
// annotation or one list item) and a message that says what is accepted.
type problem struct {
	bad    any
	detail string
}

// parseFunc checks one value, with surrounding whitespace removed, and stores it in s. It writes
// only the Spec fields of its own key, so two results can be compared to detect conflicts.
type parseFunc func(value string, s *Spec) []problem

// Parse reads every annotation key in Keys and returns the typed spec and every problem found,
// sorted by key. Each problem is a field.Invalid at metadata.annotations[<key>]. Keys under
// portico-lb.io/ that Portico does not know are reported as typos; keys under any other prefix
// that Portico does not read are ignored. When the list is not empty the spec holds the valid
// settings only and must not be acted on.
func Parse(annotations map[string]string) (Spec, field.ErrorList) {
	spec := Spec{AWS: AWS{Type: AWSClassic}}
	var errs keyedErrors

	// winners records, per canonical key, which of its names was used and what it parsed to.
	winners := map[string]keyWinner{}
	for _, k := range Keys {
		if w, ok := parseKey(k, annotations, &spec, &errs); ok {
			winners[k.Name] = w
		}
	}

	// Different keys that set the same thing must agree; the first in this order wins.
	var firstInternal *keyWinner
	for _, key := range []string{Internal, AWSLoadBalancerInternal, AWSLoadBalancerScheme} {
		w, ok := winners[key]
		if !ok {
			continue
		}
		if firstInternal == nil {
			firstInternal = &w
			continue
		}
		if w.parsed.Internal != firstInternal.parsed.Internal {
			errs.add(w.name, w.value, fmt.Sprintf("means internal=%t, which conflicts with %s=%q; set one of them, or make them agree",
				w.parsed.Internal, firstInternal.name, firstInternal.value))
			spec.Internal = firstInternal.parsed.Internal
		}
	}

	for name, v := range annotations {
		if strings.HasPrefix(name, porticoPrefix) && !isKnown(name) {
			errs.add(name, v, unknownDetail(name))
		}
	}
	return spec, errs.list()
}

// ParseKey reads one key of Keys (with its aliases) and nothing else: it returns the Spec with only
// that key's fields set and the key's problems, exactly as Parse reports them. It is for readers
// that apply one rule of a Service without judging the rest, such as portico-agent enforcing
// source ranges. An unknown key is a programming error and panics.
func ParseKey(annotations map[string]string, key string) (Spec, field.ErrorList) {
	i := slices.IndexFunc(Keys, func(k Key) bool { return k.Name == key })
	if i < 0 {
		panic("annotations: ParseKey of an unknown key " + key)
	}
	var spec Spec
	var errs keyedErrors
	parseKey(Keys[i], annotations, &spec, &errs)
	return spec, errs.list()
}

// keyWinner is the name of a key (or alias) that was used, its value and what it parsed to.
type keyWinner struct {
	name, value string
	parsed      Spec
}

// parseKey parses k and its aliases from annotations into spec, adding problems to errs. The
// first valid name wins; the others must parse to the same value. It reports the winner.
func parseKey(k Key, annotations map[string]string, spec *Spec, errs *keyedErrors) (keyWinner, bool) {
	var first *keyWinner
	for _, name := range k.names() {
		raw, ok := annotations[name]
		if !ok {
			continue
		}
		v := strings.TrimSpace(raw)
		var got Spec
		if probs := k.parse(v, &got); len(probs) > 0 {
			for _, p := range probs {
				errs.add(name, p.bad, p.detail)
			}
			continue
		}
		if first == nil {
			first = &keyWinner{name: name, value: v, parsed: got}
			k.parse(v, spec)
			continue
		}
		if !reflect.DeepEqual(first.parsed, got) {
			errs.add(name, v, fmt.Sprintf("conflicts with %s=%q; set one of them, or give them the same value", first.name, first.value))
		}
	}
	if first == nil {
		return keyWinner{}, false
	}
	return *first, true
}

// names returns the canonical key followed by its aliases, in precedence order.
func (k Key) names() []string {
	return append([]string{k.Name}, k.Aliases...)
}

func isKnown(name string) bool {
	for _, k := range Keys {
		if slices.Contains(k.names(), name) {
			return true
		}
	}
	return false
}

// unknownDetail explains an unknown portico-lb.io key and suggests the closest known one.
func unknownDetail(name string) string {
	var known []string
	best, bestDist := "", 4 // suggest only keys within three edits
	for _, k := range Keys {
		for _, n := range k.names() {
			if !strings.HasPrefix(n, porticoPrefix) {
				continue
			}
			known = append(known, n)
			d := editDistance(strings.ToLower(name), strings.ToLower(n))
			if d < bestDist {
				best, bestDist = n, d
			}
		}
	}
	msg := "unknown " + porticoPrefix + " annotation"
	if best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg + "; known keys: " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keyedErrors collects errors with their annotation key, to sort them by key.
type keyedErrors []keyedError

type keyedError struct {
	key string
	err *field.Error
}

func (e *keyedErrors) add(key string, bad any, detail string) {
	path := field.NewPath("metadata", "annotations").Key(key)
	*e = append(*e, keyedError{key: key, err: field.Invalid(path, bad, detail)})
}

// list returns the errors sorted by key; errors of one key keep the order they were found in.
func (e keyedErrors) list() field.ErrorList {
	slices.SortStableFunc(e, func(a, b keyedError) int { return strings.Compare(a.key, b.key) })
	var out field.ErrorList
	for _, ke := range e {
		out = append(out, ke.err)
	}
	return out
}

// Value helpers.

const wantBool = `must be "true" or "false"`

func parseBool(v string) (bool, []problem) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, []problem{{v, wantBool}}
}

// parseInt accepts a decimal integer in [lo, hi]; what names the quantity for the message.
func parseInt(v string, lo, hi int, what string) (int, []problem) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, []problem{{v, fmt.Sprintf("must be an integer %s from %d to %d", what, lo, hi)}}
	}
	return n, nil
}

// splitList splits a comma-separated list, trimming spaces around items. An empty value is an
// empty list; an empty item (",," or a trailing comma) and a repeated item are problems.
// canon maps an item to the form used to detect repeats (nil: the item itself); what names an
// item in the message about a repeat.
func splitList(v, what string, canon func(string) string) ([]string, []problem) {
	if v == "" {
		return nil, nil
	}
	var items []string
	var probs []problem
	seen := map[string]bool{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			probs = append(probs, problem{v, "empty item in comma-separated list"})
			continue
		}
		c := item
		if canon != nil {
			c = canon(item)
		}
		if seen[c] {
			probs = append(probs, problem{item, "duplicate " + what})
			continue
		}
		seen[c] = true
		items = append(items, item)
	}
	return items, probs
}

// parseKeyValues parses "k=v,k2=v2,keyonly" into a map; a key without "=" or with an empty value
// maps to "". check validates one pair and returns its problems.
func parseKeyValues(v string, check func(k, val string) []problem) (map[string]string, []problem) {
	items, probs := splitList(v, "key", func(item string) string {
		k, _, _ := strings.Cut(item, "=")
		return strings.TrimSpace(k)
	})
	if len(items) == 0 {
		return nil, probs
	}
	out := make(map[string]string, len(items))
	for _, item := range items {
		k, val, _ := strings.Cut(item, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if p := check(k, val); len(p) > 0 {
			probs = append(probs, p...)
			continue
		}
		out[k] = val
	}
	return out, probs
}

// Provider-neutral keys.

func parseInternal(v string, s *Spec) []problem {
	b, probs := parseBool(v)
	s.Internal = b
	return probs
}

func parseSourceRanges(v string, s *Spec) []problem {
	const want = "want a comma-separated list of CIDRs such as 10.0.0.0/8 or 2001:db8::/32"
	canon := func(item string) string {
		if p, err := netip.ParsePrefix(item); err == nil {
			return p.Masked().String()
		}
		return item
	}
	items, probs := splitList(v, "CIDR", canon)
	var out []netip.Prefix
	for _, item := range items {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			if a, aerr := netip.ParseAddr(item); aerr == nil {
				probs = append(probs, problem{item, fmt.Sprintf("a bare IP is not a CIDR; write %s/%d for a single address", a, a.BitLen())})
			} else {
				probs = append(probs, problem{item, "not a CIDR; " + want})
			}
			continue
		}
		out = append(out, p.Masked())
	}
	s.SourceRanges = out
	return probs
}

func parseLoadBalancerIPs(v string, s *Spec) []problem {
	const want = "want a comma-separated list of IP addresses such as 198.18.128.10, 2001:db8::10"
	canon := func(item string) string {
		if a, err := netip.ParseAddr(item); err == nil {
			return a.String()
		}
		return item
	}
	items, probs := splitList(v, "address", canon)
	var out []netip.Addr
	for _, item := range items {
		a, err := netip.ParseAddr(item)
		switch {
		case err != nil:
			if _, perr := netip.ParsePrefix(item); perr == nil {
				probs = append(probs, problem{item, "a CIDR is not an address; " + want})
			} else {
				probs = append(probs, problem{item, "not an IP address; " + want})
			}
		case a.Zone() != "":
			probs = append(probs, problem{item, "an address with a zone is not allowed; " + want})
		case a.Is4In6():
			probs = append(probs, problem{item, fmt.Sprintf("an IPv4-mapped IPv6 address is not allowed; write %s", a.Unmap())})
		default:
			out = append(out, a)
		}
	}
	s.RequestedIPs = out
	return probs
}

// AWS keys.

func parseAWSInternal(v string, s *Spec) []problem {
	// cloud-provider-aws: any non-empty value other than "false" means internal.
	s.Internal = v != "" && v != "false"
	return nil
}

func parseAWSScheme(v string, s *Spec) []problem {
	switch v {
	case "internal":
		s.Internal = true
		return nil
	case "internet-facing":
		s.Internal = false
		return nil
	}
	return []problem{{v, `must be "internal" or "internet-facing"`}}
}

func parseAWSType(v string, s *Spec) []problem {
	switch v {
	case "nlb":
		s.AWS.Type = AWSNLB
		return nil
	case "external", "nlb-ip":
		return []problem{{v, fmt.Sprintf("%q belongs to the AWS Load Balancer Controller, which handles this Service instead of Portico; "+
			`Portico accepts "nlb", or no annotation for a Classic ELB`, v)}}
	}
	return []problem{{v, `must be "nlb", or remove the annotation for a Classic ELB`}}
}

func parseAWSCrossZone(v string, s *Spec) []problem {
	b, probs := parseBool(v)
	if probs == nil {
		s.AWS.CrossZone = &b
	}
	return probs
}

// AWS tag limits (in Unicode characters).
const (
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

func parseAWSTags(v string, s *Spec) []problem {
	tags, probs := parseKeyValues(v, func(k, val string) []problem {
		var probs []problem
		switch {
		case k == "":
			probs = append(probs, problem{k + "=" + val, "tag key must not be empty; want k=v,k2=v2,keyonly"})
		case utf8.RuneCountInString(k) > maxTagKeyLen:
			probs = append(probs, problem{k, fmt.Sprintf("tag key must be at most %d characters", maxTagKeyLen)})
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			probs = append(probs, problem{k, `tag keys starting with "aws:" are reserved by AWS`})
		}
		if utf8.RuneCountInString(val) > maxTagValueLen {
			probs = append(probs, problem{val, fmt.Sprintf("tag value must be at most %d characters", maxTagValueLen)})
		}
		return probs
	})
	s.AWS.AdditionalTags = tags
	return probs
}

func parseAWSSubnets(v string, s *Spec) []problem {
	items, probs := splitList(v, "subnet", nil)
	s.AWS.Subnets = items
	return probs
}

func parseAWSTargetNodeLabels(v string, s *Spec) []problem {
	labels, probs := parseKeyValues(v, func(k, val string) []problem {
		var probs []problem
		for _, msg := range content.IsLabelKey(k) {
			probs = append(probs, problem{k, "invalid label key: " + msg})
		}
		for _, msg := range content.IsLabelValue(val) {
			probs = append(probs, problem{val, "invalid label value: " + msg})
		}
		return probs
	})
	s.AWS.TargetNodeLabels = labels
	return probs
}

func parseAWSIdleTimeout(v string, s *Spec) []problem {
	d, probs := parseSeconds(v, 1, 4000)
	s.AWS.ConnectionIdleTimeout = d
	return probs
}

func parseAWSProxyProtocol(v string, s *Spec) []problem {
	if v != "*" {
		return []problem{{v, `must be "*" (PROXY protocol on every backend); remove the annotation to turn it off`}}
	}
	s.AWS.ProxyProtocol = true
	return nil
}

func parseAWSSSLCert(v string, s *Spec) []problem {
	const want = "must be an ACM or IAM certificate ARN such as arn:aws:acm:us-east-1:123456789012:certificate/<id>"
	parts := strings.SplitN(v, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || (parts[2] != "acm" && parts[2] != "iam") ||
		parts[5] == "" || strings.IndexFunc(v, unicode.IsSpace) >= 0 {
		return []problem{{v, want}}
	}
	s.AWS.SSLCert = v
	return nil
}

func parseAWSSSLPorts(v string, s *Spec) []problem {
	const want = `want "*" or a comma-separated list of port numbers (1-65535) and port names`
	items, probs := splitList(v, "port", func(item string) string {
		if n, err := strconv.Atoi(item); err == nil {
			return strconv.Itoa(n)
		}
		return item
	})
	if len(items) == 0 && probs == nil {
		return []problem{{v, "must not be empty; " + want}}
	}
	var out []string
	for _, item := range items {
		if item == "*" {
			if len(items) > 1 {
				probs = append(probs, problem{v, `"*" means every port and cannot be combined with other ports`})
				continue
			}
			out = append(out, item)
			continue
		}
		if n, err := strconv.Atoi(item); err == nil {
			if n < 1 || n > 65535 {
				probs = append(probs, problem{item, "port number out of range; " + want})
				continue
			}
			out = append(out, strconv.Itoa(n))
			continue
		}
		if msgs := validation.IsValidPortName(item); len(msgs) > 0 {
			probs = append(probs, problem{item, "not a port number or port name (" + strings.Join(msgs, "; ") + "); " + want})
			continue
		}
		out = append(out, item)
	}
	s.AWS.SSLPorts = out
	return probs
}

func parseAWSSSLNegotiationPolicy(v string, s *Spec) []problem {
	if v == "" || len(v) > 128 || strings.IndexFunc(v, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) >= 0 {
		return []problem{{v, "must be a predefined policy name such as ELBSecurityPolicy-TLS13-1-2-2021-06 (letters, digits, '-', '_', '.')"}}
	}
	s.AWS.SSLNegotiationPolicy = v
	return nil
}

func parseAWSDrainingEnabled(v string, s *Spec) []problem {
	b, probs := parseBool(v)
	if probs == nil {
		s.AWS.ConnectionDraining = &b
	}
	return probs
}

func parseAWSDrainingTimeout(v string, s *Spec) []problem {
	d, probs := parseSeconds(v, 1, 3600)
	s.AWS.ConnectionDrainingTimeout = d
	return probs
}

// parseGroupIDs parses a list of security group IDs.
func parseGroupIDs(v string) ([]string, []problem) {
	items, probs := splitList(v, "security group", nil)
	var out []string
	for _, item := range items {
		rest, ok := strings.CutPrefix(item, "sg-")
		if !ok || rest == "" || strings.Trim(rest, "0123456789abcdef") != "" {
			probs = append(probs, problem{item, "must be a security group ID such as sg-0123456789abcdef0"})
			continue
		}
		out = append(out, item)
	}
	if len(items) == 0 && probs == nil {
		probs = append(probs, problem{v, "must list at least one security group ID; remove the annotation for the default"})
	}
	return out, probs
}

func parseAWSSecurityGroups(v string, s *Spec) []problem {
	ids, probs := parseGroupIDs(v)
	s.AWS.SecurityGroups = ids
	return probs
}

func parseAWSExtraSecurityGroups(v string, s *Spec) []problem {
	ids, probs := parseGroupIDs(v)
	s.AWS.ExtraSecurityGroups = ids
	return probs
}

func parseAWSBackendProtocol(v string, s *Spec) []problem {
	p := strings.ToLower(v)
	switch p {
	case "http", "https", "ssl", "tcp":
		s.AWS.BackendProtocol = p
		return nil
	}
	return []problem{{v, `must be one of "http", "https", "ssl", "tcp"`}}
}

func parseAWSHealthCheckProtocol(v string, s *Spec) []problem {
	p := strings.ToUpper(v)
	switch p {
	case "TCP", "HTTP", "HTTPS":
		s.AWS.HealthCheck.Protocol = p
		return nil
	}
	return []problem{{v, `must be one of "TCP", "HTTP", "HTTPS" (any case)`}}
}

func parseAWSHealthCheckPort(v string, s *Spec) []problem {
	if v == "traffic-port" {
		s.AWS.HealthCheck.Port = v
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return []problem{{v, `must be "traffic-port" or a port number from 1 to 65535`}}
	}
	s.AWS.HealthCheck.Port = strconv.Itoa(n)
	return nil
}

const maxHealthCheckPathLen = 1024

func parseAWSHealthCheckPath(v string, s *Spec) []problem {
	if !strings.HasPrefix(v, "/") || len(v) > maxHealthCheckPathLen ||
		strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return []problem{{v, fmt.Sprintf(`must be a path starting with "/", at most %d characters, without whitespace`, maxHealthCheckPathLen)}}
	}
	s.AWS.HealthCheck.Path = v
	return nil
}

func parseThreshold(v string) (*int32, []problem) {
	n, probs := parseInt(v, 2, 10, "number of checks")
	if probs != nil {
		return nil, probs
	}
	t := int32(n)
	return &t, nil
}

func parseAWSHealthyThreshold(v string, s *Spec) []problem {
	t, probs := parseThreshold(v)
	s.AWS.HealthCheck.HealthyThreshold = t
	return probs
}

func parseAWSUnhealthyThreshold(v string, s *Spec) []problem {
	t, probs := parseThreshold(v)
	s.AWS.HealthCheck.UnhealthyThreshold = t
	return probs
}

func parseSeconds(v string, lo, hi int) (*time.Duration, []problem) {
	n, probs := parseInt(v, lo, hi, "number of seconds")
	if probs != nil {
		return nil, probs
	}
	d := time.Duration(n) * time.Second
	return &d, nil
}

func parseAWSHealthCheckTimeout(v string, s *Spec) []problem {
	d, probs := parseSeconds(v, 2, 120)
	s.AWS.HealthCheck.Timeout = d
	return probs
}

func parseAWSHealthCheckInterval(v string, s *Spec) []problem {
	d, probs := parseSeconds(v, 5, 300)
	s.AWS.HealthCheck.Interval = d
	return probs
}

// Bare-metal keys.

func parseAddressPool(v string, s *Spec) []problem {
	if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
		return []problem{{v, "must be a pool name (a DNS-1123 subdomain): " + strings.Join(msgs, "; ")}}
	}
	s.BareMetal.AddressPool = v
	return nil
}

func parseAllowSharedIP(v string, s *Spec) []problem {
	if v == "" {
		return []problem{{v, "must be a non-empty sharing key; remove the annotation to not share"}}
	}
	s.BareMetal.AllowSharedIP = v
	return nil
}
