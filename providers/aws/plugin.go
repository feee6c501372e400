package aws

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-lb/portico/providers"
)

// Plugin registers the AWS provider (see providers/registry).
var Plugin = providers.Plugin{
	Name: "aws",
	NewConfig: func() providers.Config {
		return &Config{DefaultType: string(Classic), VerifyPeriod: metav1.Duration{Duration: DefaultVerifyPeriod},
			MaxRetries: DefaultMaxRetries, MaxBackoff: metav1.Duration{Duration: DefaultMaxBackoff}}
	},
}

// Config is the AWS provider's configuration: flags --aws-*, keys under "providers.aws"
// (portico-controller) or "aws" (portico-ccm's cloud config). Credentials come from the SDK's
// default chain: environment, shared config files, IRSA / pod identity, instance profile.
type Config struct {
	// Region of the load balancers, e.g. "eu-west-1". Required unless the SDK's environment
	// (AWS_REGION, shared config) names one.
	Region string `json:"region,omitempty"`
	// Endpoint overrides the AWS endpoint of every service (a private endpoint, or moto in tests).
	Endpoint string `json:"endpoint,omitempty"`
	// DefaultType is the load balancer kind for Services without the type annotation:
	// "classic" (as cloud-provider-aws) or "nlb".
	DefaultType string `json:"defaultType,omitempty"`
	// ExtraTags are added to everything the provider creates ("k=v,k2=v2" on the command line).
	ExtraTags map[string]string `json:"extraTags,omitempty"`
	// Subnets used when a Service names none; empty means discovery by tags.
	Subnets []string `json:"subnets,omitempty"`
	// SecurityGroups attached to every Classic ELB instead of a security group of its own.
	SecurityGroups []string `json:"securityGroups,omitempty"`
	// VerifyPeriod is how often a load balancer whose Service did not change is read back in
	// full and repaired (a listener deleted by hand, a rule revoked). In between, an unchanged
	// Service costs only its share of one batched read per 20 load balancers. A restart and any
	// failed Ensure verify at once. Default 1h.
	VerifyPeriod metav1.Duration `json:"verifyPeriod,omitempty"`
	// APIThrottle limits the AWS API on the client side, one token bucket per rule
	// "<service>:<operation regexp>=<rate>:<burst>" (service IDs "EC2", "Elastic Load
	// Balancing", "Elastic Load Balancing v2"; the first matching rule applies; retries wait
	// too). Default: none.
	APIThrottle []string `json:"apiThrottle,omitempty"`
	// MaxRetries is how often a failed AWS call (throttling, a transient error) is retried by
	// the SDK's standard retryer, with exponential backoff and jitter up to MaxBackoff.
	// Default 2 (the SDK's 3 attempts).
	MaxRetries int `json:"maxRetries"`
	// MaxBackoff is the longest wait between two attempts, 1s-10m. Default (or 0) 20s.
	MaxBackoff metav1.Duration `json:"maxBackoff,omitempty"`
}

// BindFlags registers the --aws-* flags.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Region, "aws-region", c.Region, "AWS region (default: from the SDK environment)")
	fs.StringVar(&c.Endpoint, "aws-endpoint", c.Endpoint, "URL overriding the AWS endpoint of every service (private endpoints; moto in tests)")
	fs.StringVar(&c.DefaultType, "aws-default-type", c.DefaultType, "load balancer kind for Services without the type annotation: classic or nlb")
	fs.Func("aws-extra-tags", "tags k=v,k2=v2 added to every AWS resource created", func(s string) error {
		m, err := parseTagList(s)
		if err != nil {
			return err
		}
		c.ExtraTags = m
		return nil
	})
	fs.Func("aws-subnets", "comma-separated subnet IDs used when a Service names none (default: discovered by tags)", func(s string) error {
		c.Subnets = splitComma(s)
		return nil
	})
	fs.DurationVar(&c.VerifyPeriod.Duration, "aws-verify-period", c.VerifyPeriod.Duration, "how often an unchanged load balancer is read back in full and repaired (drift made outside Portico)")
	fs.Func("aws-api-throttle", `client-side AWS API rate limits, comma-separated "<service>:<operation regexp>=<rate>:<burst>", e.g. "Elastic Load Balancing v2:RegisterTargets|DeregisterTargets=4:20,EC2:Describe.*=10:40"`, func(s string) error {
		c.APIThrottle = splitComma(s)
		for _, r := range c.APIThrottle {
			if _, err := ParseThrottleRule(r); err != nil {
				return err
			}
		}
		return nil
	})
	fs.IntVar(&c.MaxRetries, "aws-max-retries", c.MaxRetries, "retries of a failed AWS call (throttling, transient errors) by the SDK's standard retryer")
	fs.DurationVar(&c.MaxBackoff.Duration, "aws-max-backoff", c.MaxBackoff.Duration, "longest backoff between two attempts of an AWS call")
	fs.Func("aws-security-groups", "comma-separated security group IDs attached to Classic ELBs instead of one group per load balancer", func(s string) error {
		c.SecurityGroups = splitComma(s)
		return nil
	})
}

var (
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	subnetRE = regexp.MustCompile(`^subnet-[0-9a-f]+$`)
	sgRE     = regexp.MustCompile(`^sg-[0-9a-f]+$`)
)

// Validate returns every problem with the configuration.
func (c *Config) Validate(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Region != "" && !regionRE.MatchString(c.Region) {
		errs = append(errs, field.Invalid(root.Child("region"), c.Region, "must be an AWS region such as eu-west-1"))
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(root.Child("endpoint"), c.Endpoint, "must be an http(s) URL such as https://vpce-123.elasticloadbalancing.eu-west-1.vpce.amazonaws.com"))
		}
	}
	switch Kind(c.DefaultType) {
	case Classic, NLB:
	default:
		errs = append(errs, field.NotSupported(root.Child("defaultType"), c.DefaultType, []string{string(Classic), string(NLB)}))
	}
	for _, k := range sortedKeys(c.ExtraTags) {
		if msg := checkTag(k, c.ExtraTags[k]); msg != "" {
			errs = append(errs, field.Invalid(root.Child("extraTags").Key(k), c.ExtraTags[k], msg))
		}
	}
	for i, s := range c.Subnets {
		if !subnetRE.MatchString(s) {
			errs = append(errs, field.Invalid(root.Child("subnets").Index(i), s, "must be a subnet ID such as subnet-0123abcd"))
		}
	}
	for i, s := range c.SecurityGroups {
		if !sgRE.MatchString(s) {
			errs = append(errs, field.Invalid(root.Child("securityGroups").Index(i), s, "must be a security group ID such as sg-0123abcd"))
		}
	}
	for i, r := range c.APIThrottle {
		if _, err := ParseThrottleRule(r); err != nil {
			errs = append(errs, field.Invalid(root.Child("apiThrottle").Index(i), r, err.Error()))
		}
	}
	if c.MaxRetries < 0 || c.MaxRetries > 50 {
		errs = append(errs, field.Invalid(root.Child("maxRetries"), c.MaxRetries, "must be 0-50"))
	}
	if d := c.MaxBackoff.Duration; d != 0 && (d < time.Second || d > 10*time.Minute) {
		errs = append(errs, field.Invalid(root.Child("maxBackoff"), c.MaxBackoff.Duration.String(), "must be 1s-10m"))
	}
	if c.VerifyPeriod.Duration < time.Minute {
		errs = append(errs, field.Invalid(root.Child("verifyPeriod"), c.VerifyPeriod.Duration.String(), "must be at least 1m"))
	}
	return errs
}

// New builds the provider. It does not contact AWS: credentials are resolved on the first call.
func (c *Config) New(ctx context.Context, env providers.Env) (providers.Provider, error) {
	if env.ClusterName == "" {
		return nil, fmt.Errorf("the AWS provider needs a cluster name for its ownership tags")
	}
	awsCfg, err := loadAWSConfig(ctx, c.Region)
	if err != nil {
		return nil, err
	}
	var rules []ThrottleRule
	for _, s := range c.APIThrottle {
		r, err := ParseThrottleRule(s)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	retries := c.MaxRetries
	return NewWithConfig(awsCfg, Options{
		ClusterName:    env.ClusterName,
		Endpoint:       c.Endpoint,
		DefaultType:    Kind(c.DefaultType),
		ExtraTags:      c.ExtraTags,
		Subnets:        c.Subnets,
		SecurityGroups: c.SecurityGroups,
		Logger:         env.Logger,
		Metrics:        env.Metrics,
		VerifyPeriod:   c.VerifyPeriod.Duration,
		Throttle:       rules,
		MaxRetries:     &retries,
		MaxBackoff:     c.MaxBackoff.Duration,
	})
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseTagList(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range splitComma(s) {
		k, v, _ := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if msg := checkTag(k, v); msg != "" {
			return nil, fmt.Errorf("tag %q: %s", k, msg)
		}
		m[k] = strings.TrimSpace(v)
	}
	return m, nil
}
