package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-lb/portico/api/v1alpha1"
	"github.com/portico-lb/portico/config"
	"github.com/portico-lb/portico/controllers/service"
	"github.com/portico-lb/portico/providers"
	"github.com/portico-lb/portico/providers/registry"
)

// Orphans runs `portico-controller orphans`: it lists on out the Services the configured
// instance holds but does not serve (service.Ownership.Orphans), and with cfg.Delete deletes
// their load balancers through the providers they record, built from cfg's provider settings
// (extra providers, by name, are used as they are: tests pass the ones they observe). Unclaimed
// Services (no holder recorded) are listed and never deleted. It returns an error when a
// deletion failed.
func Orphans(ctx context.Context, cfg config.Orphans[registry.Configs], restCfg *rest.Config, logger logr.Logger, out io.Writer, extra map[string]providers.Provider) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	var list corev1.ServiceList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	own := service.Ownership{Instance: cfg.InstanceName(), Classes: cfg.Classes, Classless: cfg.ClasslessProvider}
	orphans := own.Orphans(list.Items)
	printOrphans(out, own, orphans, cfg.Delete)
	if !cfg.Delete {
		return nil
	}

	var needed []string
	for _, o := range orphans {
		if !o.Unclaimed && o.Provider != "" && extra[o.Provider] == nil && !slices.Contains(needed, o.Provider) {
			needed = append(needed, o.Provider)
		}
	}
	if err := cfg.Providers.Validate(field.NewPath("config", "providers"), needed).ToAggregate(); err != nil {
		return fmt.Errorf("invalid configuration of the orphans' providers: %w", err)
	}
	provs, err := cfg.Providers.Build(ctx, needed, providers.Env{
		ClusterName: cfg.ClusterName,
		Logger:      logger.WithName("provider"),
		RESTConfig:  restCfg,
		Metrics:     prometheus.NewRegistry(),
		ProviderFor: func(class *string) string {
			p, _ := own.ProviderFor(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class}})
			return p
		},
	})
	if err != nil {
		return err
	}
	if provs == nil {
		provs = map[string]providers.Provider{}
	}
	maps.Copy(provs, extra)
	var errs []error
	for _, o := range orphans {
		if o.Unclaimed {
			continue
		}
		key := o.Service.Namespace + "/" + o.Service.Name
		if err := service.DeleteOrphan(ctx, c, service.Options{Ownership: own, Providers: provs}, o); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			fmt.Fprintf(out, "%s: not deleted: %v\n", key, err)
			continue
		}
		fmt.Fprintf(out, "%s: load balancer deleted, finalizer removed\n", key)
	}
	return errors.Join(errs...)
}

// printOrphans writes the table of orphans and what to do with them.
func printOrphans(out io.Writer, own service.Ownership, orphans []service.Orphan, deleting bool) {
	if len(orphans) == 0 {
		fmt.Fprintf(out, "No orphans: instance %s serves every Service it holds.\n", own.Instance)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tCLASS\tPROVIDER\tINGRESS\tHOLDER")
	for _, o := range orphans {
		class, provider, ingress, holder := "<none>", o.Provider, "<none>", own.Instance
		if c := o.Service.Spec.LoadBalancerClass; c != nil {
			class = *c
		}
		if provider == "" {
			provider = "<unknown>"
		}
		if ing := o.Service.Status.LoadBalancer.Ingress; len(ing) > 0 {
			ingress = ing[0].IP + ing[0].Hostname
		}
		if o.Unclaimed {
			holder = "<not recorded>"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\n", o.Service.Namespace, o.Service.Name, class, provider, ingress, holder)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "Instance %s serves %s.\n", own.Instance, own.Served())
	if !deleting {
		fmt.Fprintln(out, "Run with --delete to delete the load balancers of the Services it holds.")
	}
	if slices.ContainsFunc(orphans, func(o service.Orphan) bool { return o.Unclaimed }) {
		fmt.Fprintln(out, "Services whose holder is <not recorded> come from a Portico release that did not record holders and may be "+
			"another instance's: the instance serving their class adopts them when it runs; they are never deleted here.")
	}
}
