package config

import (
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Orphans is the configuration of `portico-controller orphans`: the configuration of the
// controller instance whose orphans are listed (the same flags and --config file; its instance
// name, classes and provider settings are what matter), and whether to delete them.
//
// An orphan is a Service whose finalizer that instance holds (annotation
// controller.portico-lb.io/owner) although it does not serve the Service's class: its load
// balancer is kept until the Service is deleted, its type leaves LoadBalancer, the class is
// served again, or this command deletes it.
type Orphans[P ProviderConfigs] struct {
	Controller[P]
	// Delete deletes the orphans' load balancers (through the provider each Service records),
	// clears their status and removes the finalizer; false only lists them.
	Delete bool
}

// DefaultOrphans returns the defaults: the controller's, listing only.
func DefaultOrphans[P ProviderConfigs](providers P) Orphans[P] {
	return Orphans[P]{Controller: DefaultController(providers)}
}

// BindFlags registers the controller's flags and --delete on fs.
func (o *Orphans[P]) BindFlags(fs *pflag.FlagSet) {
	o.Controller.BindFlags(fs)
	fs.BoolVar(&o.Delete, "delete", o.Delete, "delete the orphans' load balancers and remove their finalizer (default: list them only)")
}

// Validate returns every problem with the configuration. Unlike the controller, an instance
// that serves no class any more is valid here: its Services are all orphans. The providers'
// settings are validated for the providers the orphans name, when they are deleted.
func (o *Orphans[P]) Validate() error {
	return aggregate("invalid configuration", o.validate(field.NewPath("config")))
}
