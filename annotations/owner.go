package annotations

// Keys portico-controller writes on the Services it provisions, to record whose load balancer it
// is. They are not settings: users do not set them, and Parse does not read them. They live under
// their own prefix, which Portico releases from before they existed ignore, so a downgrade does
// not turn them into unknown portico-lb.io/ keys.
const (
	ownerPrefix = "controller.portico-lb.io/"

	// Owner names the portico-controller instance that holds the Service's finalizer
	// (config.Controller.InstanceName: by default "<leader-election namespace>/<leader-election
	// id>"). Only that instance updates or deletes the load balancer; another instance, even one
	// serving the same loadBalancerClass, leaves the Service alone.
	Owner = ownerPrefix + "owner"

	// Provider names the provider that made the load balancer, so that it is deleted through
	// that provider even after the Service's class is no longer served.
	Provider = ownerPrefix + "provider"
)

// OwnerOf returns the recorded owner instance and provider of a Service ("" when not recorded).
func OwnerOf(annotations map[string]string) (instance, provider string) {
	return annotations[Owner], annotations[Provider]
}
