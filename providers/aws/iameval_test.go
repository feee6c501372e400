package aws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A small evaluator of the IAM policy for the tests: the statements of deploy/aws/iam-policy.json
// (with the cluster name in place of policyClusterName) against one request, with the condition
// operators the policy uses (StringEquals, Null). Only Allow statements exist in the policy; a
// request no statement allows is denied, as IAM does.

// iamRequest is what IAM would see of one authorisation: the action, the resource's ARN (""
// for a resource that does not exist yet), the request's tags, the resource's tags, and
// service-specific keys (ec2:CreateAction, elasticloadbalancing:CreateAction).
type iamRequest struct {
	Action       string
	Resource     string
	RequestTags  map[string]string
	ResourceTags map[string]string
	Keys         map[string]string
}

func (r iamRequest) String() string {
	return fmt.Sprintf("%s on %q (request tags %v, resource tags %v, keys %v)", r.Action, r.Resource, r.RequestTags, r.ResourceTags, r.Keys)
}

// value returns the request's value of a condition key and whether it is present.
func (r iamRequest) value(key string) (string, bool) {
	if k, ok := strings.CutPrefix(key, "aws:RequestTag/"); ok {
		v, ok := r.RequestTags[k]
		return v, ok
	}
	if k, ok := strings.CutPrefix(key, "aws:ResourceTag/"); ok {
		v, ok := r.ResourceTags[k]
		return v, ok
	}
	v, ok := r.Keys[key]
	return v, ok
}

// loadPolicy reads the policy file for cluster.
func loadPolicy(t *testing.T, cluster string) policyDocument {
	t.Helper()
	b, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(policyClusterName), []byte(cluster))
	var doc policyDocument
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("decoding %s: %v", policyPath, err)
	}
	return doc
}

// allows returns the Sid of the first statement allowing r, or an error saying why none does.
func (doc policyDocument) allows(r iamRequest) (string, error) {
	for _, s := range doc.Statement {
		if s.Effect != "Allow" || !slices.ContainsFunc(s.Action, func(a string) bool { return globMatch(a, r.Action) }) {
			continue
		}
		if s.Resource != "*" && (r.Resource == "" || !globMatch(s.Resource, r.Resource)) {
			continue
		}
		ok, err := conditionsHold(s.Condition, r)
		if err != nil {
			return "", fmt.Errorf("statement %s: %w", s.Sid, err)
		}
		if ok {
			return s.Sid, nil
		}
	}
	return "", fmt.Errorf("no statement allows %s", r)
}

func conditionsHold(cond map[string]map[string]any, r iamRequest) (bool, error) {
	for op, keys := range cond {
		for key, want := range keys {
			got, present := r.value(key)
			switch op {
			case "Null":
				if want != "true" && want != "false" {
					return false, fmt.Errorf("Null %s: %v is not true or false", key, want)
				}
				if present == (want == "true") {
					return false, nil
				}
			case "StringEquals":
				if !present || !slices.Contains(stringValues(want), got) {
					return false, nil
				}
			default:
				return false, fmt.Errorf("condition operator %s is not known to the test's evaluator", op)
			}
		}
	}
	return true, nil
}

// stringValues is a condition value, a string or a list of strings.
func stringValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []string:
		return v
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// globMatch matches IAM's wildcards: * any run of characters, ? one character.
func globMatch(pattern, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// checkPolicyScoped fails t unless the policy denies, for cluster, what an unscoped policy
// allows: changes and deletes of resources without the cluster's tag, creates without it in
// the request, ec2:CreateTags outside a create, and deletes of resources the cluster only
// shares. The policy of 3e563f2 (every action on "*", no condition) fails every one.
func checkPolicyScoped(t *testing.T, doc policyDocument, cluster string) {
	t.Helper()
	tag := clusterTag(cluster)
	owned := map[string]string{tag: tagOwned}
	for _, tc := range []struct {
		r     iamRequest
		allow bool
	}{
		{iamRequest{Action: "ec2:CreateSecurityGroup", Resource: newGroupARN, RequestTags: owned}, true},
		{iamRequest{Action: "ec2:CreateSecurityGroup", Resource: newGroupARN, RequestTags: map[string]string{"team": "x"}}, false},
		{iamRequest{Action: "ec2:CreateSecurityGroup", Resource: "arn:aws:ec2:us-east-1:123456789012:vpc/vpc-1"}, true},
		{iamRequest{Action: "ec2:CreateTags", Resource: newGroupARN, RequestTags: owned, Keys: map[string]string{"ec2:CreateAction": "CreateSecurityGroup"}}, true},
		{iamRequest{Action: "ec2:CreateTags", Resource: newGroupARN, RequestTags: owned, ResourceTags: owned}, false},
		{iamRequest{Action: "ec2:CreateTags", Resource: "arn:aws:ec2:us-east-1:123456789012:instance/i-1", RequestTags: owned, Keys: map[string]string{"ec2:CreateAction": "CreateSecurityGroup"}}, false},
		{iamRequest{Action: "elasticloadbalancing:CreateLoadBalancer", RequestTags: map[string]string{clusterTag("other"): tagOwned}}, false},
		{iamRequest{Action: "elasticloadbalancing:AddTags", RequestTags: owned, Keys: map[string]string{"elasticloadbalancing:CreateAction": "CreateTargetGroup"}}, true},
		{iamRequest{Action: "elasticloadbalancing:AddTags", RequestTags: owned, ResourceTags: map[string]string{}}, false},
		{iamRequest{Action: "ec2:AuthorizeSecurityGroupIngress", ResourceTags: map[string]string{tag: "shared"}}, true},
		{iamRequest{Action: "ec2:AuthorizeSecurityGroupIngress", ResourceTags: map[string]string{}}, false},
		{iamRequest{Action: "ec2:DeleteSecurityGroup", ResourceTags: owned}, true},
		{iamRequest{Action: "ec2:DeleteSecurityGroup", ResourceTags: map[string]string{tag: "shared"}}, false},
		{iamRequest{Action: "elasticloadbalancing:DeleteLoadBalancer", ResourceTags: map[string]string{"kubernetes.io/cluster/other": tagOwned}}, false},
		{iamRequest{Action: "elasticloadbalancing:RegisterTargets", ResourceTags: map[string]string{}}, false},
		{iamRequest{Action: "elasticloadbalancing:DeleteListener", Resource: "arn:aws:elasticloadbalancing:us-east-1:123456789012:listener/net/lb/1/2"}, true},
		{iamRequest{Action: "elasticloadbalancing:DeleteListener", Resource: "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/lb/1"}, false},
		{iamRequest{Action: "ec2:DescribeInstances"}, true},
	} {
		_, err := doc.allows(tc.r)
		if (err == nil) != tc.allow {
			t.Errorf("the policy allows %s: %v, want %v", tc.r, err == nil, tc.allow)
		}
	}
}

// newGroupARN stands for a security group being created (AWS authorises the create against it).
const newGroupARN = "arn:aws:ec2:us-east-1:123456789012:security-group/*"

// TestIAMPolicyScoped: the shipped policy denies what an unscoped one allows (checkPolicyScoped).
// On 3e563f2 every "want false" case fails: the policy allows every action on every resource.
func TestIAMPolicyScoped(t *testing.T) {
	checkPolicyScoped(t, loadPolicy(t, "c1"), "c1")
}

// TestChartIAMPolicyIsTheOne: the chart's copy is the policy file, byte for byte (also checked
// in ./deploy). On 3e563f2 the two differ (the chart's lacks iam:CreateServiceLinkedRole).
func TestChartIAMPolicyIsTheOne(t *testing.T) {
	one, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(chartPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one, chart) {
		t.Errorf("%s differs from %s; regenerate both with: go test ./providers/aws -run TestIAMPolicy -update-iam-policy", chartPolicyPath, policyPath)
	}
}
