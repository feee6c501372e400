package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/providers"
)

// Options configure a Provider.
type Options struct {
	// ClusterName goes into the ownership tag kubernetes.io/cluster/<ClusterName>=owned.
	ClusterName string
	// Endpoint overrides every service's endpoint when not empty.
	Endpoint       string
	DefaultType    Kind
	ExtraTags      map[string]string
	Subnets        []string
	SecurityGroups []string
	Logger         logr.Logger
	// Metrics receives the portico_aws_api_* metrics (metrics.go); nil registers nothing.
	Metrics prometheus.Registerer
	// VerifyPeriod is how often a load balancer whose desired state did not change is fully read
	// back and repaired (applied.go). Zero means DefaultVerifyPeriod.
	VerifyPeriod time.Duration
	// Throttle limits the rate of matching AWS operations on the client side (throttle.go).
	Throttle []ThrottleRule
	// MaxRetries, when not nil, is how often the SDK's standard retryer retries a failed
	// attempt, with backoff up to MaxBackoff (zero: DefaultMaxBackoff). Nil keeps the
	// configuration's retryer.
	MaxRetries *int
	MaxBackoff time.Duration
	// now is the clock (tests move it); nil means time.Now.
	now func() time.Time
	// sgLessNLBs creates NLBs without security groups, as Portico did before the backend
	// group (tests of the per-Service node rules such NLBs keep).
	sgLessNLBs bool
}

// Provider is the AWS provider. AWS, through names and tags, is the only record of what exists;
// the provider remembers only which load balancers it verified lately and a few seconds of
// batched reads (applied.go), so a restarted provider converges every load balancer once.
type Provider struct {
	opts    Options
	api     clients
	calls   *apiCalls
	log     logr.Logger
	cluster string

	verified      *verifications
	backend       *backendGroups
	instances     *instanceCache
	nlbReader     *lbReader
	classicReader *lbReader
}

var _ providers.Provider = (*Provider)(nil)

// loadAWSConfig reads the SDK's default configuration chain (environment, shared files, web
// identity, container and instance credentials). Retries and their backoff, throttling
// included, are the SDK's standard retryer, configured by Options.MaxRetries and MaxBackoff.
func loadAWSConfig(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set --aws-region (providers.aws.region) or AWS_REGION")
	}
	return cfg, nil
}

// NewWithConfig builds a provider on an explicit SDK configuration (tests use static
// credentials and moto's endpoint).
func NewWithConfig(cfg aws.Config, opts Options) (*Provider, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("the AWS provider needs a cluster name for its ownership tags")
	}
	if opts.DefaultType == "" {
		opts.DefaultType = Classic
	}
	calls, err := newAPICalls(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("registering AWS metrics: %w", err)
	}
	cfg = cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, calls.middleware)
	if len(opts.Throttle) > 0 {
		cfg.APIOptions = append(cfg.APIOptions, newThrottle(opts.Throttle, calls).middleware)
	}
	if opts.MaxRetries != nil {
		backoff := opts.MaxBackoff
		if backoff == 0 {
			backoff = DefaultMaxBackoff
		}
		cfg.Retryer = retryer(*opts.MaxRetries, backoff)
	}
	if opts.Endpoint != "" {
		cfg.BaseEndpoint = aws.String(opts.Endpoint)
	}
	if opts.VerifyPeriod == 0 {
		opts.VerifyPeriod = DefaultVerifyPeriod
	}
	now := opts.now
	if now == nil {
		now = time.Now
	}
	p := &Provider{
		opts:      opts,
		api:       newClients(cfg),
		calls:     calls,
		log:       opts.Logger,
		cluster:   opts.ClusterName,
		verified:  &verifications{period: opts.VerifyPeriod, now: now, m: map[string]verification{}},
		backend:   &backendGroups{ids: map[string]string{}, allowed: map[string]bool{}},
		instances: &instanceCache{now: now, m: map[string]cachedInstance{}},
	}
	p.nlbReader = newLBReader(p.fetchNLBs, readWindow, readMaxAge, describeLBBatch, now)
	p.classicReader = newLBReader(p.fetchClassics, readWindow, readMaxAge, describeLBBatch, now)
	return p, nil
}

// Name is "aws".
func (p *Provider) Name() string { return "aws" }

// Capabilities: node ports are required; NLBs serve TCP and UDP (TCP_UDP on one port), Classic
// ELBs TCP only (rejected per Service); IPv4 only; no affinity, no requested IPs.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{
		NeedsNodePorts: true,
		MixedProtocols: true,
		Protocols:      []providers.Protocol{providers.TCP, providers.UDP},
		IPFamilies:     []providers.IPFamily{providers.IPv4},
	}
}

// lbRecord is an existing load balancer the provider owns, of either kind.
type lbRecord struct {
	Kind    Kind
	Name    string
	ARN     string // NLB only
	DNSName string
	Scheme  string
	VPC     string
	Subnets []string
	Tags    map[string]string
	// SecurityGroups the load balancer carries, sorted (an NLB created without any never
	// gets one).
	SecurityGroups []string
	// TargetGroups are the NLB's target groups as last converged (not read back by the
	// batched reader; nodeset.go).
	TargetGroups []string
	// IPAddressType is the NLB's ipv4 or dualstack.
	IPAddressType string
}

// Ensure converges the Service's load balancer. When the kind or scheme changed, it creates the
// replacement first and converges it; the old one, named in the replacement's
// portico-lb.io/replaces tag, is deleted by a later Ensure once the Service's status names the
// replacement (ReplacementPending tells the caller to write the status and call again). A
// crash at any point leaves the tag, so the next Ensure finishes the switch.
func (p *Provider) Ensure(ctx context.Context, lb *providers.LoadBalancer) (providers.Status, error) {
	d, err := p.desired(lb)
	if err != nil {
		return providers.Status{}, err
	}
	hash := desiredHash(d)
	rec, ok, err := p.unchanged(ctx, lb.Ref, d, hash)
	if err != nil {
		return providers.Status{}, err
	}
	if !ok {
		// Only the node set changed since the last convergence: register and deregister.
		rec, ok, err = p.nodesOnly(ctx, lb.Ref, d, hash)
		if err != nil {
			p.verified.forget(d.Name)
			p.reader(d.Kind).forget(d.Name)
			return providers.Status{}, err
		}
	}
	if !ok {
		// Whatever happens next, nothing read before is trusted until a convergence succeeds.
		p.verified.forget(d.Name)
		p.reader(d.Kind).forget(d.Name)
		if rec, err = p.converge(ctx, lb.Ref, d); err != nil {
			return providers.Status{}, err
		}
		if err := p.finishReplacement(ctx, lb.Ref, rec, lb.CurrentHostnames); err != nil {
			return providers.Status{}, err
		}
		if err := p.recordApplied(ctx, rec, d, hash); err != nil {
			return providers.Status{}, err
		}
	}
	st := status(rec)
	st.Warnings = d.Warnings
	st.ReplacementPending = rec.Tags[tagReplaces] != ""
	return st, nil
}

// converge reads back everything of d's load balancer and makes it so. It holds the backend
// group's use (backendsg.go) so that no collection removes the group it attaches.
func (p *Provider) converge(ctx context.Context, ref providers.Ref, d desiredLB) (rec *lbRecord, err error) {
	p.backend.use.RLock()
	defer p.backend.use.RUnlock()
	defer func() {
		if err != nil {
			// The cached backend group may be what failed (deleted outside Portico).
			p.backend.forget()
		}
	}()
	nodes, err := p.describeInstances(ctx, d.Instances)
	if err != nil {
		return nil, err
	}
	switch d.Kind {
	case NLB:
		return p.ensureNLB(ctx, ref, d, nodes)
	default:
		return p.ensureClassic(ctx, ref, d, nodes)
	}
}

// replacedNames returns the value of the replaces tag for a new load balancer: every owned load
// balancer of the Service other than the new one.
func replacedValue(olds []lbRecord, newName string) string {
	var parts []string
	for _, o := range olds {
		if o.Name != newName {
			parts = append(parts, string(o.Kind)+"/"+o.Name)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// finishReplacement deletes the load balancers rec replaces, then drops the tag, once the
// Service's status (current) names rec or names no hostname at all; until then the old load
// balancer keeps serving what the status points at.
func (p *Provider) finishReplacement(ctx context.Context, ref providers.Ref, rec *lbRecord, current []string) error {
	v := rec.Tags[tagReplaces]
	if v == "" {
		return nil
	}
	if len(current) > 0 && !slices.Contains(current, rec.DNSName) {
		p.log.V(1).Info("Replacement waits for the status to name it", "service", ref, "name", rec.Name, "replaces", v)
		return nil
	}
	for _, item := range strings.Fields(v) {
		kind, name, _ := strings.Cut(item, "/")
		if name == rec.Name && Kind(kind) == rec.Kind {
			continue
		}
		if err := p.deleteLB(ctx, ref, Kind(kind), name); err != nil {
			return fmt.Errorf("deleting replaced load balancer %s: %w", name, err)
		}
	}
	if err := p.untagLB(ctx, rec, tagReplaces); err != nil {
		return err
	}
	delete(rec.Tags, tagReplaces)
	if err := p.collectBackendGroups(ctx); err != nil {
		return err
	}
	p.log.Info("Deleted replaced load balancers", "service", ref, "name", rec.Name, "replaced", v)
	return nil
}

// Get returns the status of the Service's load balancer: the one that replaces others when a
// replacement is under way.
func (p *Provider) Get(ctx context.Context, ref providers.Ref) (providers.Status, error) {
	recs, err := p.findOwnedLBs(ctx, ref)
	if err != nil {
		return providers.Status{}, err
	}
	if len(recs) == 0 {
		return providers.Status{}, fmt.Errorf("%s: %w", ref, providers.ErrNotFound)
	}
	best := recs[0]
	for _, r := range recs {
		if r.Tags[tagReplaces] != "" {
			best = r
		}
	}
	return status(&best), nil
}

// Delete removes every load balancer, target group, security group and node security-group rule
// owned for ref, found by tags and rule descriptions, then the cluster's backend group if no
// load balancer carries it any more.
func (p *Provider) Delete(ctx context.Context, ref providers.Ref) error {
	recs, err := p.findOwnedLBs(ctx, ref)
	if err != nil {
		return err
	}
	// Per-Service node rules exist only for an NLB created without security groups, or were
	// written by an older Portico; when no load balancer is left to tell (a retried Delete),
	// every group is scanned for them.
	scan := len(recs) == 0
	for _, r := range recs {
		p.verified.forget(r.Name)
		p.reader(r.Kind).forget(r.Name)
		if r.Kind == NLB {
			scan = scan || len(r.SecurityGroups) == 0
			err = p.deleteNLBByARN(ctx, ref, r.Name, r.ARN)
		} else {
			err = p.deleteClassic(ctx, r.Name)
		}
		if err != nil {
			return err
		}
	}
	// What a crash may have left without a load balancer.
	if err := p.deleteOwnedTargetGroups(ctx, ref); err != nil {
		return err
	}
	if scan {
		if err := p.revokeNodeRules(ctx, ref.UID, ""); err != nil {
			return err
		}
	}
	if err := p.deleteOwnedSecurityGroups(ctx, ref, ""); err != nil {
		return err
	}
	// The shared backend group and its node rules, once no load balancer carries it.
	return p.collectBackendGroups(ctx)
}

// deleteLB deletes one load balancer and what belongs to it alone.
func (p *Provider) deleteLB(ctx context.Context, ref providers.Ref, kind Kind, name string) error {
	if err := p.deleteLoadBalancer(ctx, ref, kind, name); err != nil {
		return err
	}
	if err := p.revokeNodeRules(ctx, ref.UID, name); err != nil {
		return err
	}
	return p.deleteOwnedSecurityGroups(ctx, ref, name)
}

// deleteLoadBalancer deletes one load balancer (an NLB with its target groups).
func (p *Provider) deleteLoadBalancer(ctx context.Context, ref providers.Ref, kind Kind, name string) error {
	p.verified.forget(name)
	p.reader(kind).forget(name)
	if kind == NLB {
		return p.deleteNLB(ctx, ref, name)
	}
	return p.deleteClassic(ctx, name)
}

// findOwnedLBs returns the load balancers of both kinds tagged as owned for ref. A Service's
// load balancers can only have one of four names (lbName: two kinds, two schemes), or the one
// cloud-provider-aws gave a load balancer Portico adopted (adoption.go), so they are described
// by name: a constant number of calls however many load balancers the region holds.
func (p *Provider) findOwnedLBs(ctx context.Context, ref providers.Ref) ([]lbRecord, error) {
	var out []lbRecord
	for _, scheme := range []string{schemeInternetFacing, schemeInternal, ""} {
		name := lbName(p.cluster, ref, NLB, scheme)
		if scheme == "" {
			name = cloudProviderName(ref)
		}
		lb, err := p.findNLB(ctx, name)
		if err != nil {
			return nil, err
		}
		if lb != nil {
			arn := aws.ToString(lb.LoadBalancerArn)
			tags, err := p.nlbTags(ctx, []string{arn})
			if err != nil {
				return nil, err
			}
			if ownedBy(tags[arn], p.cluster, ref.UID) {
				out = append(out, *nlbRecord(lb, tags[arn]))
			}
		}
		if scheme != "" {
			name = lbName(p.cluster, ref, Classic, scheme)
		}
		clb, err := p.findClassic(ctx, name)
		if err != nil {
			return nil, err
		}
		if clb != nil {
			tags, err := p.classicTags(ctx, []string{name})
			if err != nil {
				return nil, err
			}
			if ownedBy(tags[name], p.cluster, ref.UID) {
				out = append(out, *classicRecord(clb, tags[name]))
			}
		}
	}
	return out, nil
}

func status(rec *lbRecord) providers.Status {
	return providers.Status{Ingress: []providers.Ingress{{Hostname: rec.DNSName}}}
}
