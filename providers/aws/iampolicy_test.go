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
// plus the permissions AWS requires for those calls without a call of their own.

var updatePolicy = flag.Bool("update-iam-policy", false, "rewrite deploy/aws/iam-policy.json from the seam interfaces")

const policyPath = "../../deploy/aws/iam-policy.json"

// impliedActions are permissions AWS checks for a call Portico makes, each with why.
var impliedActions = map[string]string{
	// CreateSecurityGroup with TagSpecifications (backendsg.go, securitygroups.go) is
	// authorised against ec2:CreateTags as well.
	"ec2:CreateTags": "tags on create (CreateSecurityGroup)",
}

// serviceLinkedRole lets Elastic Load Balancing create its service-linked role when the account
// has none yet: the first CreateLoadBalancer in an account needs it.
const serviceLinkedRole = "elasticloadbalancing.amazonaws.com"

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
	Sid       string         `json:"Sid"`
	Effect    string         `json:"Effect"`
	Action    []string       `json:"Action"`
	Resource  string         `json:"Resource"`
	Condition map[string]any `json:"Condition,omitempty"`
}

type policyDocument struct {
	Version   string            `json:"Version"`
	Statement []policyStatement `json:"Statement"`
}

func derivedPolicy(t *testing.T) policyDocument {
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{
		{Sid: "PorticoLoadBalancers", Effect: "Allow", Action: seamActions(t), Resource: "*"},
		{Sid: "ElasticLoadBalancingServiceLinkedRole", Effect: "Allow", Action: []string{"iam:CreateServiceLinkedRole"}, Resource: "*",
			Condition: map[string]any{"StringEquals": map[string]string{"iam:AWSServiceName": serviceLinkedRole}}},
	}}
}

// TestIAMPolicy: the shipped policy grants exactly the actions derived from the seam
// interfaces (and the implied ones): none missing, none extra.
func TestIAMPolicy(t *testing.T) {
	want := derivedPolicy(t)
	if *updatePolicy {
		b, err := json.MarshalIndent(want, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(policyPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
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
