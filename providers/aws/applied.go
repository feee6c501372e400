package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/portico-lb/portico/providers"
)

// The steady state. A resync where nothing changed must make no write and few reads (the
// target: at most one batched Describe per 20 Services). So a full convergence (every listener, target
// group, target, attribute and security-group rule read and compared) runs only when
//
//   - the desired model (node set included) differs from the one last applied, which the load
//     balancer records in its tag portico-lb.io/applied (a hash, written after a successful
//     convergence) and the provider in memory;
//   - the provider has not fully verified the load balancer within VerifyPeriod (drift made
//     outside Portico, such as a deleted listener, is repaired then); a restarted provider
//     verifies each load balancer once on its first Ensure;
//   - the previous Ensure of it failed;
//   - a replacement is under way (portico-lb.io/replaces).
//
// Otherwise Ensure reads only the load balancer and its tags, through lbReader, which batches
// those reads across Services.

// appliedVersion changes when the meaning of a desired model changes (a new field applied), so
// that an upgraded provider converges every load balancer once.
// 2: the shared backend security group (backendsg.go); 3: every managed attribute converged to
// its default when the Service does not set it.
const appliedVersion = "3"

// DefaultVerifyPeriod is how often a load balancer whose desired model is unchanged is fully
// read back and repaired.
const DefaultVerifyPeriod = time.Hour

const (
	// readWindow is how long the first Ensure of a batch waits for others to join it.
	readWindow = 20 * time.Millisecond
	// readMaxAge is how long a batched answer serves a later Ensure of the same load balancer.
	readMaxAge = time.Minute
	// describeLBBatch is the most load balancers one batched read covers: ELBv2 DescribeTags
	// and Classic DescribeTags take at most 20.
	describeLBBatch = 20
)

// desiredHash is the value of the applied tag for d: everything the provider converges, not the
// warnings it reports.
func desiredHash(d desiredLB) string {
	d.Warnings = nil
	b, err := json.Marshal(d)
	if err != nil {
		// desiredLB holds only strings, numbers, maps, slices and prefixes.
		panic(fmt.Sprintf("encoding the desired model: %v", err))
	}
	s := sha256.Sum256(append([]byte(appliedVersion+"\x00"), b...))
	return hex.EncodeToString(s[:16])
}

// verifications records, per load balancer name, the desired hash last fully converged and
// when. Lost on restart, which makes the first Ensure after a start a full one.
type verifications struct {
	period time.Duration
	now    func() time.Time

	mu sync.Mutex
	m  map[string]verification
}

type verification struct {
	hash string
	at   time.Time
	// model is the desired model converged; targetGroups the NLB's target groups then.
	model        desiredLB
	targetGroups []string
}

// fresh reports whether name was verified with hash within the period.
func (v *verifications) fresh(name, hash string) bool {
	x, ok := v.get(name)
	return ok && x.hash == hash
}

func (v *verifications) done(name, hash string, model desiredLB, targetGroups []string) {
	v.mu.Lock()
	v.m[name] = verification{hash: hash, at: v.now(), model: model, targetGroups: targetGroups}
	v.mu.Unlock()
}

// advance records a node-set change applied to name without a full verification: the model
// and hash move on, the time of the last full verification stays.
func (v *verifications) advance(name, hash string, model desiredLB) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if x, ok := v.m[name]; ok {
		x.hash, x.model = hash, model
		v.m[name] = x
	}
}

// models returns up to n models of load balancers managing node rules, converged within the
// period (in no particular order).
func (v *verifications) models(n int) []desiredLB {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []desiredLB
	for _, x := range v.m {
		if len(out) == n {
			break
		}
		if x.model.Name != "" && x.model.ManageNodeRules && v.now().Sub(x.at) < v.period {
			out = append(out, x.model)
		}
	}
	return out
}

// get returns the verification of name if it is within the period.
func (v *verifications) get(name string) (verification, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	x, ok := v.m[name]
	return x, ok && v.now().Sub(x.at) < v.period
}

func (v *verifications) forget(name string) {
	v.mu.Lock()
	delete(v.m, name)
	v.mu.Unlock()
}

// unchanged returns the status of d's load balancer when nothing needs converging: it exists,
// is owned for ref, carries the applied hash, was verified recently and replaces nothing.
func (p *Provider) unchanged(ctx context.Context, ref providers.Ref, d desiredLB, hash string) (*lbRecord, bool, error) {
	if !p.verified.fresh(d.Name, hash) {
		return nil, false, nil
	}
	rec, err := p.reader(d.Kind).get(ctx, d.Name)
	if err != nil {
		return nil, false, err
	}
	if rec == nil || !ownedBy(rec.Tags, p.cluster, ref.UID) || rec.Tags[tagApplied] != hash || rec.Tags[tagReplaces] != "" {
		return nil, false, nil
	}
	return rec, true, nil
}

func (p *Provider) reader(kind Kind) *lbReader {
	if kind == NLB {
		return p.nlbReader
	}
	return p.classicReader
}

// recordApplied tags the load balancer with the hash of what was just converged (a write only
// when it changed) and notes the verification.
func (p *Provider) recordApplied(ctx context.Context, rec *lbRecord, d desiredLB, hash string) error {
	if err := p.tagApplied(ctx, rec, hash); err != nil {
		return err
	}
	p.verified.done(rec.Name, hash, d, rec.TargetGroups)
	p.reader(rec.Kind).remember(rec.Name)
	return nil
}

// fetchNLBs is the NLB reader's batch: one DescribeLoadBalancers by name and one DescribeTags.
// AWS fails a by-name describe when any name is missing; then the region's load balancers are
// listed instead (one call per 400).
func (p *Provider) fetchNLBs(ctx context.Context, names []string) (map[string]*lbRecord, error) {
	api := p.api.nlb
	var lbs []elbv2types.LoadBalancer
	out, err := api.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: names})
	switch {
	case isCode(err, "LoadBalancerNotFound"):
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		pager := elbv2.NewDescribeLoadBalancersPaginator(api, &elbv2.DescribeLoadBalancersInput{PageSize: aws.Int32(400)})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing NLBs: %w", err)
			}
			for _, lb := range page.LoadBalancers {
				if want[aws.ToString(lb.LoadBalancerName)] {
					lbs = append(lbs, lb)
				}
			}
		}
	case err != nil:
		return nil, fmt.Errorf("describing NLBs: %w", err)
	default:
		lbs = out.LoadBalancers
	}
	res := map[string]*lbRecord{}
	var arns []string
	for _, lb := range lbs {
		if lb.Type == elbv2types.LoadBalancerTypeEnumNetwork {
			arns = append(arns, aws.ToString(lb.LoadBalancerArn))
		}
	}
	tags, err := p.nlbTags(ctx, arns)
	if err != nil {
		return nil, err
	}
	for i := range lbs {
		lb := &lbs[i]
		if lb.Type != elbv2types.LoadBalancerTypeEnumNetwork {
			continue
		}
		t, ok := tags[aws.ToString(lb.LoadBalancerArn)]
		if !ok {
			continue // deleted between the two calls
		}
		res[aws.ToString(lb.LoadBalancerName)] = nlbRecord(lb, t)
	}
	return res, nil
}

// fetchClassics is the Classic ELB reader's batch, as fetchNLBs.
func (p *Provider) fetchClassics(ctx context.Context, names []string) (map[string]*lbRecord, error) {
	out, err := p.api.classic.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: names})
	res := map[string]*lbRecord{}
	switch {
	case isCode(err, "LoadBalancerNotFound", "AccessPointNotFound"):
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		pager := elb.NewDescribeLoadBalancersPaginator(p.api.classic, &elb.DescribeLoadBalancersInput{PageSize: aws.Int32(400)})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing Classic ELBs: %w", err)
			}
			for i := range page.LoadBalancerDescriptions {
				if d := &page.LoadBalancerDescriptions[i]; want[aws.ToString(d.LoadBalancerName)] {
					res[aws.ToString(d.LoadBalancerName)] = classicRecord(d, nil)
				}
			}
		}
	case err != nil:
		return nil, fmt.Errorf("describing Classic ELBs: %w", err)
	default:
		for i := range out.LoadBalancerDescriptions {
			d := &out.LoadBalancerDescriptions[i]
			res[aws.ToString(d.LoadBalancerName)] = classicRecord(d, nil)
		}
	}
	found := sortedKeys(res)
	tags, err := p.classicTags(ctx, found)
	if err != nil {
		return nil, err
	}
	for _, n := range found {
		t, ok := tags[n]
		if !ok {
			delete(res, n)
			continue
		}
		res[n].Tags = t
	}
	return res, nil
}
