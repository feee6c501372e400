package metallb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Command is `portico-controller migrate metallb`: its flags and what it does.
type Command struct {
	// Kubeconfig path; empty means $KUBECONFIG or in-cluster.
	Kubeconfig string
	// Files to read MetalLB's resources from instead of the cluster.
	Files []string
	// Namespace MetalLB's resources live in.
	Namespace string
	// DryRun prints the converted objects as YAML and writes nothing.
	DryRun bool
	// AllowLossy writes even when some MetalLB setting has no equivalent.
	AllowLossy bool
	// LoadBalancerClass is the class MetalLB served (its --lb-class); empty: class-less Services.
	LoadBalancerClass string
}

// DefaultCommand returns the defaults.
func DefaultCommand() *Command { return &Command{Namespace: DefaultNamespace} }

// BindFlags registers the command's flags.
func (c *Command) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "path to a kubeconfig; empty means $KUBECONFIG or the in-cluster service account")
	fs.StringArrayVarP(&c.Files, "filename", "f", c.Files, "read MetalLB's resources from this YAML or JSON file instead of the cluster (repeatable)")
	fs.StringVarP(&c.Namespace, "namespace", "n", c.Namespace, "namespace of MetalLB's resources")
	fs.BoolVar(&c.DryRun, "dry-run", c.DryRun, "print the converted AddressPools and BGPPeers as YAML and write nothing (with -f, contacts no cluster)")
	fs.BoolVar(&c.AllowLossy, "allow-lossy", c.AllowLossy, "write even when some MetalLB settings have no equivalent (the report lists them as LOSSY)")
	fs.StringVar(&c.LoadBalancerClass, "load-balancer-class", c.LoadBalancerClass, "the loadBalancerClass MetalLB served (its --lb-class); empty means Services without a class")
}

// Validate returns every problem of the flags.
func (c *Command) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", c.Namespace, strings.Join(msgs, "; ")))
	}
	for _, f := range c.Files {
		if f == "" {
			errs = append(errs, errors.New("--filename: empty path"))
		}
	}
	return errors.Join(errs...)
}

// Run reads, converts, checks and (unless DryRun) writes. The report goes to report; with
// DryRun the YAML goes to out. It returns an error, and writes nothing, when the input cannot
// be converted, when a finding is lossy (without AllowLossy), or when a Service would not keep
// exactly its addresses under portico-controller.
func (c *Command) Run(ctx context.Context, out, report io.Writer) error {
	offline := c.DryRun && len(c.Files) > 0
	var dyn dynamic.Interface
	var kube kubernetes.Interface
	if !offline {
		cfg, err := c.rest()
		if err != nil {
			return err
		}
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return fmt.Errorf("creating client: %w", err)
		}
		if kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return fmt.Errorf("creating client: %w", err)
		}
	}
	var in Input
	var err error
	if len(c.Files) > 0 {
		in, err = ReadFiles(c.Files, c.Namespace)
	} else {
		in, err = ReadCluster(ctx, dyn, c.Namespace)
	}
	if err != nil {
		return err
	}
	if in.Empty() {
		return fmt.Errorf("no MetalLB resources found in namespace %s", c.Namespace)
	}
	res, err := Convert(in)
	if err != nil {
		return err
	}
	var kept []Kept
	if !offline {
		svcs, nsLabels, err := ReadServices(ctx, kube)
		if err != nil {
			return err
		}
		var class *string
		if c.LoadBalancerClass != "" {
			class = &c.LoadBalancerClass
		}
		kept = CheckServices(res.Pools, svcs, class, nsLabels)
	}
	writeReport(report, &in, res, kept, offline)
	if c.DryRun {
		if err := PrintYAML(out, res); err != nil {
			return err
		}
	}
	var refuse []string
	if res.Lossy() && !c.AllowLossy {
		refuse = append(refuse, "some MetalLB settings have no equivalent (LOSSY above); pass --allow-lossy to accept the differences")
	}
	if n := countLost(kept); n > 0 {
		refuse = append(refuse, fmt.Sprintf("%d Service(s) would not keep their addresses (see above)", n))
	}
	if len(refuse) > 0 {
		what := "nothing written"
		if c.DryRun {
			what = "a write would be refused"
		}
		return fmt.Errorf("%s: %s", what, strings.Join(refuse, "; "))
	}
	if c.DryRun {
		return nil
	}
	written, err := Apply(ctx, dyn, res)
	for _, w := range written {
		fmt.Fprintf(report, "applied %s\n", w)
	}
	return err
}

func (c *Command) rest() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig (pass --kubeconfig, or -f with --dry-run to work offline): %w", err)
	}
	return cfg, nil
}

func countLost(kept []Kept) int {
	n := 0
	for _, k := range kept {
		if !k.Keeps() {
			n++
		}
	}
	return n
}

// PrintYAML writes the converted objects as a multi-document YAML stream.
func PrintYAML(w io.Writer, res *Result) error {
	objs, err := res.Objects()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return fmt.Errorf("writing YAML: %w", err)
		}
	}
	return nil
}

// writeReport writes what was read, what was converted, every finding and the address check.
func writeReport(w io.Writer, in *Input, res *Result, kept []Kept, offline bool) {
	fmt.Fprintf(w, "read: %d IPAddressPool, %d L2Advertisement, %d BGPAdvertisement, %d BGPPeer, %d Community, %d BFDProfile\n",
		len(in.Pools), len(in.L2), len(in.BGP), len(in.Peers), len(in.Communities), len(in.BFDProfiles))
	for _, ig := range in.Ignored {
		fmt.Fprintf(w, "ignored: %s\n", ig)
	}
	fmt.Fprintf(w, "converted: %d AddressPool, %d BGPPeer\n", len(res.Pools), len(res.Peers))
	lossy := 0
	for _, f := range res.Findings {
		if f.Lossy {
			lossy++
		}
	}
	fmt.Fprintf(w, "findings: %d (%d lossy)\n", len(res.Findings), lossy)
	for _, f := range res.Findings {
		fmt.Fprintf(w, "  %s\n", f)
	}
	if offline {
		fmt.Fprintln(w, "services: not checked (offline dry run)")
		return
	}
	fmt.Fprintf(w, "services: %d LoadBalancer Service(s) MetalLB serves, %d keep their addresses\n", len(kept), len(kept)-countLost(kept))
	for _, k := range kept {
		state := "keeps"
		if !k.Keeps() {
			state = "LOSES"
		}
		ips := strings.Join(k.Status, ",")
		if ips == "" {
			ips = "(none yet)"
		}
		fmt.Fprintf(w, "  %-5s %s %s", state, k.Service, ips)
		if k.Problem != "" {
			fmt.Fprintf(w, ": %s", k.Problem)
		}
		fmt.Fprintln(w)
	}
}
