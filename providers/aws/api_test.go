package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// fakeTargets is a target group's targets behind the targetGroupAPI seam. Only the operations
// the test reaches are implemented; the embedded nil interface makes any other call panic.
type fakeTargets struct {
	targetGroupAPI
	have                []string
	registered, removed [][]string
	failRegister        error
}

func (f *fakeTargets) DescribeTargetHealth(_ context.Context, in *elbv2.DescribeTargetHealthInput, _ ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error) {
	out := &elbv2.DescribeTargetHealthOutput{}
	for _, id := range f.have {
		out.TargetHealthDescriptions = append(out.TargetHealthDescriptions, elbv2types.TargetHealthDescription{Target: &elbv2types.TargetDescription{Id: aws.String(id)}})
	}
	return out, nil
}

func ids(ts []elbv2types.TargetDescription) []string {
	var out []string
	for _, t := range ts {
		out = append(out, aws.ToString(t.Id))
	}
	return out
}

func (f *fakeTargets) RegisterTargets(_ context.Context, in *elbv2.RegisterTargetsInput, _ ...func(*elbv2.Options)) (*elbv2.RegisterTargetsOutput, error) {
	if f.failRegister != nil {
		return nil, f.failRegister
	}
	f.registered = append(f.registered, ids(in.Targets))
	return &elbv2.RegisterTargetsOutput{}, nil
}

func (f *fakeTargets) DeregisterTargets(_ context.Context, in *elbv2.DeregisterTargetsInput, _ ...func(*elbv2.Options)) (*elbv2.DeregisterTargetsOutput, error) {
	f.removed = append(f.removed, ids(in.Targets))
	return &elbv2.DeregisterTargetsOutput{}, nil
}

// TestReconcileTargets: only the difference is written, in batches of targetBatch.
func TestReconcileTargets(t *testing.T) {
	var want []string
	for i := range targetBatch + 50 {
		want = append(want, fmt.Sprintf("i-%04d", i))
	}
	f := &fakeTargets{have: []string{"i-0000", "i-gone"}}
	p := &Provider{api: clients{targetGroups: f}}
	if err := p.reconcileTargets(context.Background(), "arn:tg", "tg", want); err != nil {
		t.Fatal(err)
	}
	if len(f.registered) != 2 || len(f.registered[0]) != targetBatch || len(f.registered[1]) != 49 || slices.Contains(f.registered[0], "i-0000") {
		t.Errorf("registered batches of %v, want %d and 49 without i-0000", lens2(f.registered), targetBatch)
	}
	if len(f.removed) != 1 || !slices.Equal(f.removed[0], []string{"i-gone"}) {
		t.Errorf("deregistered %v, want [[i-gone]]", f.removed)
	}

	boom := errors.New("throttled")
	f = &fakeTargets{failRegister: boom}
	p = &Provider{api: clients{targetGroups: f}}
	if err := p.reconcileTargets(context.Background(), "arn:tg", "tg", want); !errors.Is(err, boom) {
		t.Errorf("error %v does not wrap the AWS error", err)
	}
}

func lens2(b [][]string) []int {
	var out []int
	for _, x := range b {
		out = append(out, len(x))
	}
	return out
}
