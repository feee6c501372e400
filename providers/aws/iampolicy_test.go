package aws

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The IAM policy Portico needs, deploy/aws/iam-policy.json, derived from the calls it can make:
// every method of the seam interfaces in api.go (the provider reaches AWS only through them),
// plus the permissions AWS requires for those calls without a call of their own, each granted
// under the condition of its scope (actionScopes). The file is the one policy: the chart ships a
// byte-equal copy (deploy/chart/portico/files/aws-iam-policy.json, checked in ./deploy), and
// -update-iam-policy rewrites both.

var updatePolicy = flag.Bool("update-iam-policy", false, "rewrite deploy/aws/iam-policy.json (and the chart's copy) from the seam interfaces and actionScopes")

const (
	policyPath      = "../../deploy/aws/iam-policy.json"
	chartPolicyPath = "../../deploy/chart/portico/files/aws-iam-policy.json"
)

// policyClusterName stands for the cluster name (--cluster-name) in the policy file: the
// ownership tag's key holds it (kubernetes.io/cluster/<cluster>, tags.go), and IAM condition keys
// cannot hold a wildcard or a policy variable, so the user substitutes it.
const policyClusterName = "CLUSTER_NAME"

// impliedActions are permissions AWS checks for a call Portico makes, each with why.
var impliedActions = map[string]string{
	// CreateSecurityGroup with TagSpecifications (backendsg.go, securitygroups.go) is
	// authorised against ec2:CreateTags as well.
	"ec2:CreateTags": "tags on create (CreateSecurityGroup)",
}

// serviceLinkedRole lets Elastic Load Balancing create its service-linked role when the account
// has none yet: the first CreateLoadBalancer in an account needs it.
const serviceLinkedRole = "elasticloadbalancing.amazonaws.com"

// The scope each action is granted under.
const (
	// scopeRead: read-only, on every resource.
	scopeRead = "read"
	// scopeCreate: a create whose request carries the cluster tag (aws:RequestTag).
	scopeCreate = "create"
	// scopeTagOnCreate: the tagging permission AWS checks for the tags of a create, only as
	// part of a create (ec2:CreateAction, elasticloadbalancing:CreateAction) carrying the cluster
	// tag. elasticloadbalancing:AddTags is also scopeRetag.
	scopeTagOnCreate = "tag-on-create"
	// scopeChange: a change to a resource carrying the cluster tag (aws:ResourceTag), owned
	// or shared: Portico's load balancers, target groups and security groups, and the nodes'
	// security groups it adds rules to.
	scopeChange = "change"
	// scopeDelete: deleting a resource the cluster owns (aws:ResourceTag = owned).
	scopeDelete = "delete"
	// scopeListener: NLB listeners, by ARN only. A listener is authorised against its own tags;
	// those of an NLB adopted from cloud-provider-aws carry none, and Portico rewires them.
	scopeListener = "listener"
)

// actionScopes is the scope of every action the policy grants; TestIAMPolicy fails on an
// action of the seam interfaces missing here, or one here the provider never calls.
var actionScopes = map[string]string{
	"ec2:DescribeInstances":                                        scopeRead,
	"ec2:DescribeSecurityGroups":                                   scopeRead,
	"ec2:DescribeSubnets":                                          scopeRead,
	"elasticloadbalancing:DescribeListeners":                       scopeRead,
	"elasticloadbalancing:DescribeLoadBalancerAttributes":          scopeRead,
	"elasticloadbalancing:DescribeLoadBalancers":                   scopeRead,
	"elasticloadbalancing:DescribeTags":                            scopeRead,
	"elasticloadbalancing:DescribeTargetGroupAttributes":           scopeRead,
	"elasticloadbalancing:DescribeTargetGroups":                    scopeRead,
	"elasticloadbalancing:DescribeTargetHealth":                    scopeRead,
	"ec2:CreateSecurityGroup":                                      scopeCreate,
	"elasticloadbalancing:CreateLoadBalancer":                      scopeCreate,
	"elasticloadbalancing:CreateTargetGroup":                       scopeCreate,
	"elasticloadbalancing:CreateListener":                          scopeCreate,
	"ec2:CreateTags":                                               scopeTagOnCreate,
	"ec2:AuthorizeSecurityGroupIngress":                            scopeChange,
	"ec2:RevokeSecurityGroupIngress":                               scopeChange,
	"ec2:UpdateSecurityGroupRuleDescriptionsIngress":               scopeChange,
	"elasticloadbalancing:AddTags":                                 scopeChange,
	"elasticloadbalancing:RemoveTags":                              scopeChange,
	"elasticloadbalancing:ApplySecurityGroupsToLoadBalancer":       scopeChange,
	"elasticloadbalancing:AttachLoadBalancerToSubnets":             scopeChange,
	"elasticloadbalancing:DetachLoadBalancerFromSubnets":           scopeChange,
	"elasticloadbalancing:ConfigureHealthCheck":                    scopeChange,
	"elasticloadbalancing:CreateLoadBalancerListeners":             scopeChange,
	"elasticloadbalancing:DeleteLoadBalancerListeners":             scopeChange,
	"elasticloadbalancing:CreateLoadBalancerPolicy":                scopeChange,
	"elasticloadbalancing:SetLoadBalancerPoliciesOfListener":       scopeChange,
	"elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer": scopeChange,
	"elasticloadbalancing:RegisterInstancesWithLoadBalancer":       scopeChange,
	"elasticloadbalancing:DeregisterInstancesFromLoadBalancer":     scopeChange,
	"elasticloadbalancing:ModifyLoadBalancerAttributes":            scopeChange,
	"elasticloadbalancing:SetIpAddressType":                        scopeChange,
	"elasticloadbalancing:SetSecurityGroups":                       scopeChange,
	"elasticloadbalancing:SetSubnets":                              scopeChange,
	"elasticloadbalancing:ModifyTargetGroup":                       scopeChange,
	"elasticloadbalancing:ModifyTargetGroupAttributes":             scopeChange,
	"elasticloadbalancing:RegisterTargets":                         scopeChange,
	"elasticloadbalancing:DeregisterTargets":                       scopeChange,
	"ec2:DeleteSecurityGroup":                                      scopeDelete,
	"elasticloadbalancing:DeleteLoadBalancer":                      scopeDelete,
	"elasticloadbalancing:DeleteTargetGroup":                       scopeDelete,
	"elasticloadbalancing:ModifyListener":                          scopeListener,
	"elasticloadbalancing:DeleteListener":                          scopeListener,
}

// elbCreateActions are the ELB creates that carry tags, for which AWS also checks
// elasticloadbalancing:AddTags.
var elbCreateActions = []string{"CreateListener", "CreateLoadBalancer", "CreateTargetGroup"}

// seamActions returns "<iam prefix>:<operation>" for every method of every seam interface in
// clients; the prefix comes from the SDK package of the method's input type.
func seamActions(t *testing.T) []string {
	t.Helper()
	var out []string
	ct := reflect.TypeOf(clients{})
	for i := range ct.NumField() {
		it := ct.Field(i).Type
		if it.Kind() != reflect.Interface {
			t.Fatalf("clients.%s is not an interface", ct.Field(i).Name)
		}
		for j := range it.NumMethod() {
			m := it.Method(j)
			in := m.Type.In(1).Elem() // (ctx, *XInput, ...opts)
			var prefix string
			switch pkg := in.PkgPath(); {
			case strings.HasSuffix(pkg, "/service/ec2"):
				prefix = "ec2"
			case strings.HasSuffix(pkg, "/service/elasticloadbalancing"), strings.HasSuffix(pkg, "/service/elasticloadbalancingv2"):
				prefix = "elasticloadbalancing"
			default:
				t.Fatalf("%s.%s takes %s from %s: no IAM prefix known", it.Name(), m.Name, in.Name(), pkg)
			}
			out = append(out, prefix+":"+m.Name)
		}
	}
	for a := range impliedActions {
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

type policyStatement struct {
	Sid       string                    `json:"Sid"`
	Effect    string                    `json:"Effect"`
	Action    []string                  `json:"Action"`
	Resource  string                    `json:"Resource"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

type policyDocument struct {
	Version   string            `json:"Version"`
	Statement []policyStatement `json:"Statement"`
}

// clusterTagKey is the ownership tag's key in the policy file.
const clusterTagKey = tagClusterPrefix + policyClusterName

func derivedPolicy(t *testing.T) policyDocument {
	t.Helper()
	byScope := map[string][]string{}
	for _, a := range seamActions(t) {
		scope, ok := actionScopes[a]
		if !ok {
			t.Errorf("%s: the provider calls it, and actionScopes gives it no scope", a)
			continue
		}
		byScope[scope] = append(byScope[scope], a)
	}
	for a := range actionScopes {
		if !slices.Contains(seamActions(t), a) {
			t.Errorf("%s: actionScopes grants it, and the provider never calls it", a)
		}
	}
	requestTag := "aws:RequestTag/" + clusterTagKey
	resourceTag := "aws:ResourceTag/" + clusterTagKey
	// EC2 authorises CreateSecurityGroup against the new group and against its VPC, whose
	// authorisation carries no request tags: the tag condition applies to the group only.
	var ec2Create, elbCreate []string
	for _, a := range byScope[scopeCreate] {
		if strings.HasPrefix(a, "ec2:") {
			ec2Create = append(ec2Create, a)
		} else {
			elbCreate = append(elbCreate, a)
		}
	}
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{
		{Sid: "PorticoRead", Effect: "Allow", Action: byScope[scopeRead], Resource: "*"},
		{Sid: "PorticoCreateTaggedSecurityGroups", Effect: "Allow", Action: ec2Create, Resource: "arn:aws:ec2:*:*:security-group/*",
			Condition: map[string]map[string]any{"Null": {requestTag: "false"}}},
		{Sid: "PorticoCreateSecurityGroupsInVPCs", Effect: "Allow", Action: ec2Create, Resource: "arn:aws:ec2:*:*:vpc/*"},
		{Sid: "PorticoCreateTagged", Effect: "Allow", Action: elbCreate, Resource: "*",
			Condition: map[string]map[string]any{"Null": {requestTag: "false"}}},
		{Sid: "PorticoTagOnCreateEC2", Effect: "Allow", Action: []string{"ec2:CreateTags"}, Resource: "arn:aws:ec2:*:*:security-group/*",
			Condition: map[string]map[string]any{"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, "Null": {requestTag: "false"}}},
		{Sid: "PorticoTagOnCreateELB", Effect: "Allow", Action: []string{"elasticloadbalancing:AddTags"}, Resource: "*",
			Condition: map[string]map[string]any{"StringEquals": {"elasticloadbalancing:CreateAction": elbCreateActions}, "Null": {requestTag: "false"}}},
		{Sid: "PorticoChangeClusterResources", Effect: "Allow", Action: byScope[scopeChange], Resource: "*",
			Condition: map[string]map[string]any{"Null": {resourceTag: "false", requestTag: "true"}}},
		{Sid: "PorticoDeleteOwned", Effect: "Allow", Action: byScope[scopeDelete], Resource: "*",
			Condition: map[string]map[string]any{"StringEquals": {resourceTag: tagOwned}}},
		{Sid: "PorticoNLBListeners", Effect: "Allow", Action: byScope[scopeListener], Resource: "arn:aws:elasticloadbalancing:*:*:listener/*"},
		{Sid: "ElasticLoadBalancingServiceLinkedRole", Effect: "Allow", Action: []string{"iam:CreateServiceLinkedRole"}, Resource: "*",
			Condition: map[string]map[string]any{"StringEquals": {"iam:AWSServiceName": serviceLinkedRole}}},
	}}
}

// TestIAMPolicy: the shipped policy grants exactly the actions derived from the seam
// interfaces (and the implied ones), none missing, none extra, each under its scope's condition:
// every statement granting more than reads has a condition or names its resources. The policy
// of 3e563f2 fails here (one unconditioned statement on "*" granting every action, and
// TestIAMPolicyConditionsMoto finds its chart copy different).
func TestIAMPolicy(t *testing.T) {
	want := derivedPolicy(t)
	if *updatePolicy {
		b, err := json.MarshalIndent(want, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{policyPath, chartPolicyPath} {
			if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatalf("%v; generate it with: go test ./providers/aws -run TestIAMPolicy -update-iam-policy", err)
	}
	var got policyDocument
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding %s: %v", policyPath, err)
	}
	var have []string
	for _, s := range got.Statement {
		if s.Effect != "Allow" {
			t.Errorf("statement %s: effect %s", s.Sid, s.Effect)
		}
		have = append(have, s.Action...)
	}
	var wantActions []string
	for _, s := range want.Statement {
		wantActions = append(wantActions, s.Action...)
	}
	for _, a := range wantActions {
		if !slices.Contains(have, a) {
			t.Errorf("%s lacks %s, which the provider calls", policyPath, a)
		}
	}
	for _, a := range have {
		if !slices.Contains(wantActions, a) {
			t.Errorf("%s grants %s, which the provider never calls", policyPath, a)
		}
	}
	for _, s := range got.Statement {
		reads := !slices.ContainsFunc(s.Action, func(a string) bool { return actionScopes[a] != scopeRead })
		if !reads && len(s.Condition) == 0 && s.Resource == "*" {
			t.Errorf("statement %s grants %v on every resource without a condition", s.Sid, s.Action)
		}
	}
	if !reflect.DeepEqual(normalise(t, got), normalise(t, want)) {
		t.Errorf("%s differs from the derived policy; regenerate it with: go test ./providers/aws -run TestIAMPolicy -update-iam-policy", policyPath)
	}
}

func normalise(t *testing.T, p policyDocument) string {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// policyCovers reports the operations in ops ("<SDK service ID>:<operation>", as the calls
// metric labels them) that the shipped policy does not grant.
func policyCovers(t *testing.T, ops []string) []string {
	t.Helper()
	b, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc policyDocument
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("decoding %s: %v", policyPath, err)
	}
	var granted []string
	for _, s := range doc.Statement {
		granted = append(granted, s.Action...)
	}
	var missing []string
	for _, op := range ops {
		svc, name, _ := strings.Cut(op, ":")
		prefix := "elasticloadbalancing"
		if svc == "EC2" {
			prefix = "ec2"
		}
		if !slices.Contains(granted, prefix+":"+name) {
			missing = append(missing, op)
		}
	}
	return missing
}
