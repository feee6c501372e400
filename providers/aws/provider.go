package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/providers"
)

// Options configure a Provider.
type Options struct {
	// ClusterName goes into the ownership tag kubernetes.io/cluster/<ClusterName>=owned.
	ClusterName string
	// Endpoint overrides every service's endpoint when not empty.
	Endpoint       string
	DefaultType    annotations.AWSType
	ExtraTags      map[string]string
	Subnets        []string
	SecurityGroups []string
	Logger         logr.Logger
	// Metrics receives portico_aws_api_calls_total; nil registers nothing.
	Metrics prometheus.Registerer
}

// Provider is the AWS provider. It keeps no state between calls: AWS, through names and tags,
// is the only record of what exists.
type Provider struct {
	opts    Options
	ec2     *ec2.Client
	elb     *elb.Client
	elbv2   *elbv2.Client
	calls   *apiCalls
	log     logr.Logger
	cluster string
}

var _ providers.Provider = (*Provider)(nil)

// loadAWSConfig reads the SDK's default configuration chain (environment, shared files, web
// identity, container and instance credentials). Retries and their backoff, throttling
// included, are the SDK's standard retryer.
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
		opts.DefaultType = annotations.AWSClassic
	}
	calls, err := newAPICalls(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("registering AWS metrics: %w", err)
	}
	cfg = cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, calls.middleware)
	if opts.Endpoint != "" {
		cfg.BaseEndpoint = aws.String(opts.Endpoint)
	}
	return &Provider{
		opts:    opts,
		ec2:     ec2.NewFromConfig(cfg),
		elb:     elb.NewFromConfig(cfg),
		elbv2:   elbv2.NewFromConfig(cfg),
		calls:   calls,
		log:     opts.Logger,
		cluster: opts.ClusterName,
	}, nil
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
	Kind    annotations.AWSType
	Name    string
	ARN     string // NLB only
	DNSName string
	Scheme  string
	VPC     string
	Subnets []string
	Tags    map[string]string
}

// Ensure converges the Service's load balancer. When the kind or scheme changed, it creates the
// replacement first, converges it, and only then deletes the old one (found through the
// replacement's portico-lb.io/replaces tag, so a crash in between is finished by the next call).
func (p *Provider) Ensure(ctx context.Context, lb *providers.LoadBalancer) (providers.Status, error) {
	d, err := p.desired(lb)
	if err != nil {
		return providers.Status{}, err
	}
	nodes, err := p.describeInstances(ctx, d.Instances)
	if err != nil {
		return providers.Status{}, err
	}
	var rec *lbRecord
	switch d.Kind {
	case annotations.AWSNLB:
		rec, err = p.ensureNLB(ctx, lb.Ref, d, nodes)
	default:
		rec, err = p.ensureClassic(ctx, lb.Ref, d, nodes)
	}
	if err != nil {
		return providers.Status{}, err
	}
	if err := p.finishReplacement(ctx, lb.Ref, rec); err != nil {
		return providers.Status{}, err
	}
	st := status(rec)
	st.Warnings = d.Warnings
	return st, nil
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

// finishReplacement deletes the load balancers rec replaces, then drops the tag.
func (p *Provider) finishReplacement(ctx context.Context, ref providers.Ref, rec *lbRecord) error {
	v := rec.Tags[tagReplaces]
	if v == "" {
		return nil
	}
	for _, item := range strings.Fields(v) {
		kind, name, _ := strings.Cut(item, "/")
		if name == rec.Name && annotations.AWSType(kind) == rec.Kind {
			continue
		}
		if err := p.deleteLB(ctx, ref, annotations.AWSType(kind), name); err != nil {
			return fmt.Errorf("deleting replaced load balancer %s: %w", name, err)
		}
	}
	if err := p.untagLB(ctx, rec, tagReplaces); err != nil {
		return err
	}
	delete(rec.Tags, tagReplaces)
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
// owned for ref, found by tags and rule descriptions.
func (p *Provider) Delete(ctx context.Context, ref providers.Ref) error {
	recs, err := p.findOwnedLBs(ctx, ref)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := p.deleteLB(ctx, ref, r.Kind, r.Name); err != nil {
			return err
		}
	}
	// What a crash may have left without a load balancer.
	if err := p.deleteOwnedTargetGroups(ctx, ref); err != nil {
		return err
	}
	if err := p.revokeNodeRules(ctx, ref.UID, ""); err != nil {
		return err
	}
	return p.deleteOwnedSecurityGroups(ctx, ref, "")
}

// deleteLB deletes one load balancer and what belongs to it alone.
func (p *Provider) deleteLB(ctx context.Context, ref providers.Ref, kind annotations.AWSType, name string) error {
	switch kind {
	case annotations.AWSNLB:
		if err := p.deleteNLB(ctx, ref, name); err != nil {
			return err
		}
	default:
		if err := p.deleteClassic(ctx, name); err != nil {
			return err
		}
	}
	if err := p.revokeNodeRules(ctx, ref.UID, name); err != nil {
		return err
	}
	return p.deleteOwnedSecurityGroups(ctx, ref, name)
}

// findOwnedLBs lists the load balancers of both kinds tagged as owned for ref.
func (p *Provider) findOwnedLBs(ctx context.Context, ref providers.Ref) ([]lbRecord, error) {
	nlbs, err := p.findOwnedNLBs(ctx, ref)
	if err != nil {
		return nil, err
	}
	clbs, err := p.findOwnedClassics(ctx, ref)
	if err != nil {
		return nil, err
	}
	return append(nlbs, clbs...), nil
}

func status(rec *lbRecord) providers.Status {
	return providers.Status{Ingress: []providers.Ingress{{Hostname: rec.DNSName}}}
}
