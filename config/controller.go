package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ProviderConfigs is every provider's own configuration as a binary's provider registry holds
// it (providers/registry.Configs). config binds, decodes and validates it through these
// methods only, so config links no provider: each binary's cmd passes its registry in.
type ProviderConfigs interface {
	// Names are the registered providers, sorted.
	Names() []string
	// BindFlags registers every provider's flags ("--<name>-...").
	BindFlags(fs *flag.FlagSet)
	// UnmarshalJSON decodes {"<provider>": {...}} into the configurations held, strictly.
	json.Unmarshaler
	// Validate validates the providers in use and every provider set away from its defaults.
	Validate(root *field.Path, inUse []string) field.ErrorList
}

// Controller is the configuration of portico-controller. P is the binary's provider registry.
type Controller[P ProviderConfigs] struct {
	// Kubeconfig path; empty means in-cluster or $KUBECONFIG.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Classes maps each spec.loadBalancerClass this controller owns to the provider serving it.
	Classes map[string]string `json:"classes,omitempty"`
	// ClasslessProvider, when set, makes the controller also own Services without a
	// loadBalancerClass (as a cloud-controller-manager does) and serve them with this provider.
	ClasslessProvider string `json:"classlessProvider,omitempty"`
	// Instance names this controller in the Services it provisions (annotation
	// controller.portico-lb.io/owner): only the instance a Service names updates or deletes its
	// load balancer. Empty means "<LeaderElectionNamespace>/<LeaderElectionID>", which the
	// replicas of one installation share and two installations cannot (see InstanceName).
	Instance string `json:"instance,omitempty"`
	// Providers holds every registered provider's own configuration (file key
	// "providers: {<name>: {...}}", flags "--<name>-..."); only the providers in use are
	// validated and built.
	Providers P `json:"providers,omitempty"`
	// ResyncPeriod is how often every owned Service is re-ensured so that providers repair
	// out-of-band changes. 0 disables it.
	ResyncPeriod metav1.Duration `json:"resyncPeriod,omitempty"`
	// Workers is the number of Services reconciled in parallel.
	Workers int `json:"workers,omitempty"`
	// IgnoreExcludeLB makes nodes labelled node.kubernetes.io/exclude-from-external-load-balancers
	// load-balancer backends like any other (servicerules.IgnoreExcludeLabel).
	IgnoreExcludeLB bool `json:"ignoreExcludeLB,omitempty"`

	// Deployment is the name of the controller's own Deployment, in LeaderElectionNamespace:
	// with leader election it owns the Lease (an owner reference), so that deleting the
	// Deployment, as an uninstall does, deletes the Lease too. Empty: the Lease has no owner.
	Deployment string `json:"deployment,omitempty"`

	LeaderElect              bool            `json:"leaderElect,omitempty"`
	LeaderElectionNamespace  string          `json:"leaderElectionNamespace,omitempty"`
	LeaderElectionID         string          `json:"leaderElectionID,omitempty"`
	LeaderElectionLease      metav1.Duration `json:"leaderElectionLease,omitempty"`
	LeaderElectionRenew      metav1.Duration `json:"leaderElectionRenew,omitempty"`
	LeaderElectionRetry      metav1.Duration `json:"leaderElectionRetry,omitempty"`
	MetricsBindAddress       string          `json:"metricsBindAddress,omitempty"`
	HealthProbeBindAddress   string          `json:"healthProbeBindAddress,omitempty"`
	ClusterName              string          `json:"clusterName,omitempty"`
	classFlag, classlessFlag string
	configFile               string
}

// DefaultController returns the defaults, with providers (every registered provider at its
// defaults: registry.NewConfigs()).
func DefaultController[P ProviderConfigs](providers P) Controller[P] {
	return Controller[P]{
		Classes:                 map[string]string{},
		Providers:               providers,
		ResyncPeriod:            metav1.Duration{Duration: 10 * time.Minute},
		Workers:                 4,
		LeaderElect:             true,
		LeaderElectionNamespace: "kube-system",
		LeaderElectionID:        "portico-controller",
		LeaderElectionLease:     metav1.Duration{Duration: 15 * time.Second},
		LeaderElectionRenew:     metav1.Duration{Duration: 10 * time.Second},
		LeaderElectionRetry:     metav1.Duration{Duration: 2 * time.Second},
		MetricsBindAddress:      ":8080",
		HealthProbeBindAddress:  ":8081",
		ClusterName:             "portico",
	}
}

// BindFlags registers the flags on fs, the providers' among them. Flags override values from
// --config: what they are given is recorded for Complete.
func (c *Controller[P]) BindFlags(fs *pflag.FlagSet) {
	recordGiven(fs, func() { c.bindFlags(fs) })
}

func (c *Controller[P]) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.configFile, "config", "", "optional YAML config file; flags given on the command line override it")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "path to a kubeconfig; empty means in-cluster")
	fs.StringVar(&c.classFlag, "class", "", "comma list of CLASS=PROVIDER pairs: loadBalancerClasses this controller owns (providers: "+strings.Join(c.Providers.Names(), ", ")+")")
	fs.StringVar(&c.classlessFlag, "classless-provider", "", "also own Services without a loadBalancerClass and serve them with this provider")
	fs.StringVar(&c.Instance, "instance", c.Instance, "name recorded as the owner of the Services this controller provisions (annotation controller.portico-lb.io/owner); empty: <leader-election-namespace>/<leader-election-id>")
	providerFlags := flag.NewFlagSet("providers", flag.ContinueOnError)
	c.Providers.BindFlags(providerFlags)
	fs.AddGoFlagSet(providerFlags)
	fs.DurationVar(&c.ResyncPeriod.Duration, "resync-period", c.ResyncPeriod.Duration, "re-ensure every owned load balancer this often to repair drift (0 disables)")
	fs.IntVar(&c.Workers, "workers", c.Workers, "Services reconciled in parallel")
	fs.BoolVar(&c.IgnoreExcludeLB, "ignore-exclude-lb", c.IgnoreExcludeLB, "treat nodes labelled node.kubernetes.io/exclude-from-external-load-balancers as load-balancer backends like any other")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "elect a leader through a Lease so only one replica acts")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", c.LeaderElectionNamespace, "namespace of the leader-election Lease")
	fs.StringVar(&c.LeaderElectionID, "leader-election-id", c.LeaderElectionID, "name of the leader-election Lease")
	fs.StringVar(&c.Deployment, "deployment", c.Deployment, "name of the controller's Deployment in --leader-election-namespace: it becomes the owner of the leader-election Lease, so that deleting the Deployment (an uninstall) deletes the Lease; empty: the Lease outlives the controller")
	fs.DurationVar(&c.LeaderElectionLease.Duration, "leader-election-lease-duration", c.LeaderElectionLease.Duration, "how long a Lease is valid without renewal")
	fs.DurationVar(&c.LeaderElectionRenew.Duration, "leader-election-renew-deadline", c.LeaderElectionRenew.Duration, "how long the leader retries renewing before giving up")
	fs.DurationVar(&c.LeaderElectionRetry.Duration, "leader-election-retry-period", c.LeaderElectionRetry.Duration, "how often candidates retry acquiring the Lease")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address of the Prometheus /metrics endpoint (0 disables)")
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", c.HealthProbeBindAddress, "address of /healthz and /readyz (0 disables)")
	fs.StringVar(&c.ClusterName, "cluster-name", c.ClusterName, "cluster name, used by providers to tag what they create")
}

// Complete loads --config (if given) and sets the flags given on the command line over it, as
// they were given (BindFlags recorded them). Call it after fs.Parse.
func (c *Controller[P]) Complete(fs *pflag.FlagSet) error {
	given, err := takeGiven(fs)
	if err != nil {
		return err
	}
	if c.configFile != "" {
		b, err := os.ReadFile(c.configFile)
		if err != nil {
			return fmt.Errorf("reading config file: %w", err)
		}
		// Provider configurations are decoded into the objects the flags are bound to, so that
		// setting the flags again below reaches them.
		fromFile := DefaultController(c.Providers)
		if err := yaml.UnmarshalStrict(b, &fromFile); err != nil {
			return fmt.Errorf("parsing config file %s: %w", c.configFile, err)
		}
		file, classFlag, classlessFlag := c.configFile, c.classFlag, c.classlessFlag
		*c = fromFile
		c.configFile, c.classFlag, c.classlessFlag = file, classFlag, classlessFlag
		// Flags given on the command line win over the file.
		if err := replay(given); err != nil {
			return err
		}
	}
	if c.classFlag != "" {
		classes, err := parseClassList(c.classFlag)
		if err != nil {
			return err
		}
		c.Classes = classes
	}
	if fs.Changed("classless-provider") {
		c.ClasslessProvider = c.classlessFlag
	}
	return nil
}

func parseClassList(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		class, provider, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("--class: %q is not CLASS=PROVIDER", item)
		}
		class, provider = strings.TrimSpace(class), strings.TrimSpace(provider)
		if prev, dup := out[class]; dup {
			return nil, fmt.Errorf("--class: class %q is given twice (%s and %s); a class has one provider", class, prev, provider)
		}
		out[class] = provider
	}
	return out, nil
}

// InstanceName is the name this controller records as the owner of the Services it
// provisions: Instance, or "<LeaderElectionNamespace>/<LeaderElectionID>".
func (c *Controller[P]) InstanceName() string {
	if c.Instance != "" {
		return c.Instance
	}
	return c.LeaderElectionNamespace + "/" + c.LeaderElectionID
}

// Validate returns every problem with the configuration.
func (c *Controller[P]) Validate() error {
	var errs field.ErrorList
	root := field.NewPath("config")
	if len(c.Classes) == 0 && c.ClasslessProvider == "" {
		errs = append(errs, field.Required(root.Child("classes"), "own at least one loadBalancerClass (--class) or class-less Services (--classless-provider)"))
	}
	return aggregate("invalid configuration", append(errs, c.validate(root)...))
}

// validate returns the problems Validate and Orphans.Validate share: everything but the need
// to serve at least one class.
func (c *Controller[P]) validate(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.InstanceName() == "/" {
		errs = append(errs, field.Required(root.Child("instance"), "set it, or the leader-election namespace and id it defaults to"))
	}
	classes := make([]string, 0, len(c.Classes))
	for k := range c.Classes {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, class := range classes {
		p := root.Child("classes").Key(class)
		for _, msg := range validation.IsQualifiedName(class) {
			errs = append(errs, field.Invalid(p, class, "loadBalancerClass must be a label-style key (e.g. portico-lb.io/reference): "+msg))
		}
		if !slices.Contains(c.Providers.Names(), c.Classes[class]) {
			errs = append(errs, field.NotSupported(p, c.Classes[class], c.Providers.Names()))
		}
	}
	if c.ClasslessProvider != "" && !slices.Contains(c.Providers.Names(), c.ClasslessProvider) {
		errs = append(errs, field.NotSupported(root.Child("classlessProvider"), c.ClasslessProvider, c.Providers.Names()))
	}
	errs = append(errs, c.Providers.Validate(root.Child("providers"), c.ProvidersInUse())...)
	if c.ResyncPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(root.Child("resyncPeriod"), c.ResyncPeriod.Duration.String(), "must be >= 0 (0 disables)"))
	}
	if c.Workers < 1 {
		errs = append(errs, field.Invalid(root.Child("workers"), c.Workers, "must be >= 1"))
	}
	if c.LeaderElect {
		if c.LeaderElectionNamespace == "" {
			errs = append(errs, field.Required(root.Child("leaderElectionNamespace"), ""))
		}
		if c.LeaderElectionID == "" {
			errs = append(errs, field.Required(root.Child("leaderElectionID"), ""))
		}
		if !(c.LeaderElectionLease.Duration > c.LeaderElectionRenew.Duration && c.LeaderElectionRenew.Duration > c.LeaderElectionRetry.Duration && c.LeaderElectionRetry.Duration > 0) {
			errs = append(errs, field.Invalid(root.Child("leaderElectionLease"), c.LeaderElectionLease.Duration.String(),
				"need lease duration > renew deadline > retry period > 0"))
		}
	}
	if d := c.Deployment; d != "" && len(validation.IsDNS1123Subdomain(d)) > 0 {
		errs = append(errs, field.Invalid(root.Child("deployment"), d, "must be a Deployment's name (a DNS subdomain) in the leader-election namespace"))
	}
	for name, addr := range map[string]string{"metricsBindAddress": c.MetricsBindAddress, "healthProbeBindAddress": c.HealthProbeBindAddress} {
		if addr == "0" || addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, field.Invalid(root.Child(name), addr, "must be host:port, :port or 0"))
		}
	}
	if c.ClusterName == "" {
		errs = append(errs, field.Required(root.Child("clusterName"), ""))
	}
	return errs
}

// ProvidersInUse names the providers the classes and the class-less setting refer to.
func (c *Controller[P]) ProvidersInUse() []string {
	names := []string{c.ClasslessProvider}
	for _, p := range c.Classes {
		names = append(names, p)
	}
	return names
}

// RESTConfig loads the client configuration from Kubeconfig, $KUBECONFIG or the in-cluster
// service account, in that order.
func (c *Controller[P]) RESTConfig() (*rest.Config, error) {
	return restConfig(c.Kubeconfig, "")
}
