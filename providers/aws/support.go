package aws

import (
	"strings"

	"github.com/portico-lb/portico/annotations"
)

// keySupport says, for every service.beta.kubernetes.io/aws-load-balancer-* key Portico reads,
// which load balancer kinds it applies to. A key set on a Service of a kind it does not apply to
// gives one warning (nlbWarnings, classicWarnings), which the controller turns into a
// SettingIgnored Event. docs/aws.md's table is generated from it (TestDocsTable).
var keySupport = map[string]struct {
	Classic, NLB bool
	// Note qualifies the support for one kind; the meaning itself is the key's Doc.
	Note string
}{
	annotations.AWSLoadBalancerInternal:            {true, true, ""},
	annotations.AWSLoadBalancerScheme:              {true, true, ""},
	annotations.AWSLoadBalancerType:                {true, true, ""},
	annotations.AWSCrossZoneLoadBalancing:          {true, true, ""},
	annotations.AWSAdditionalResourceTags:          {true, true, ""},
	annotations.AWSSubnets:                         {true, true, ""},
	annotations.AWSTargetNodeLabels:                {true, true, ""},
	annotations.AWSConnectionIdleTimeout:           {true, false, ""},
	annotations.AWSProxyProtocol:                   {true, false, "NLB: use `" + annotations.AWSTargetGroupAttributes + "` `proxy_protocol_v2.enabled=true`"},
	annotations.AWSSSLCert:                         {true, true, "NLB: the listener becomes TLS"},
	annotations.AWSSSLPorts:                        {true, true, ""},
	annotations.AWSSSLNegotiationPolicy:            {true, true, ""},
	annotations.AWSConnectionDrainingEnabled:       {true, false, "NLB: `deregistration_delay.timeout_seconds` in `" + annotations.AWSTargetGroupAttributes + "`"},
	annotations.AWSConnectionDrainingTimeout:       {true, false, ""},
	annotations.AWSSecurityGroups:                  {true, false, ""},
	annotations.AWSExtraSecurityGroups:             {true, false, ""},
	annotations.AWSBackendProtocol:                 {true, true, "NLB: `ssl` (TLS to the targets) and `tcp` only; `http`/`https` warn"},
	annotations.AWSHealthCheckProtocol:             {true, true, ""},
	annotations.AWSHealthCheckPort:                 {true, true, ""},
	annotations.AWSHealthCheckPath:                 {true, true, ""},
	annotations.AWSHealthCheckHealthyThreshold:     {true, true, ""},
	annotations.AWSHealthCheckUnhealthyThreshold:   {true, true, ""},
	annotations.AWSHealthCheckTimeout:              {true, true, ""},
	annotations.AWSHealthCheckInterval:             {true, true, ""},
	annotations.AWSAccessLogEnabled:                {true, true, "NLB: attribute `access_logs.s3.enabled`"},
	annotations.AWSAccessLogEmitInterval:           {true, false, ""},
	annotations.AWSAccessLogS3BucketName:           {true, true, ""},
	annotations.AWSAccessLogS3BucketPrefix:         {true, true, ""},
	annotations.AWSTargetGroupAttributes:           {false, true, ""},
	annotations.AWSEIPAllocations:                  {false, true, "internet-facing; at creation"},
	annotations.AWSPrivateIPv4Addresses:            {false, true, "internal; at creation"},
	annotations.AWSNLBTargetType:                   {false, true, "`instance` only"},
	annotations.AWSIPAddressType:                   {false, true, ""},
	annotations.AWSManageBackendSecurityGroupRules: {true, true, ""},
	annotations.AWSALPNPolicy:                      {false, true, "TLS listeners"},
}

// docsTable renders keySupport as the table in docs/aws.md: key, Classic, NLB, meaning.
func docsTable() string {
	var b strings.Builder
	b.WriteString("| Key (`service.beta.kubernetes.io/...`) | Classic | NLB | Meaning |\n|---|---|---|---|\n")
	mark := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "warns"
	}
	for _, k := range annotations.Keys {
		s, ok := keySupport[k.Name]
		if !ok {
			continue
		}
		doc := k.Doc
		if s.Note != "" {
			doc += " (" + s.Note + ")"
		}
		doc = strings.ReplaceAll(strings.ReplaceAll(doc, "|", `\|`), "\n", " ")
		b.WriteString("| `" + strings.TrimPrefix(k.Name, "service.beta.kubernetes.io/") + "` | " + mark(s.Classic) + " | " + mark(s.NLB) + " | " + doc + " |\n")
	}
	return b.String()
}
