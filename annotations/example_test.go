package annotations_test

import (
	"fmt"

	"github.com/portico-lb/portico/annotations"
)

func ExampleParse() {
	spec, errs := annotations.Parse(map[string]string{
		annotations.Internal:                  "true",
		annotations.MetalLBLoadBalancerIPs:    "198.18.128.10, 2001:db8::10",
		annotations.AWSHealthCheckInterval:    "2",
		annotations.AWSCrossZoneLoadBalancing: "yes",
		"portico-lb.io/adress-pool":           "default",
		"example.com/not-ours":                "ignored",
	})
	fmt.Println(spec.Internal, spec.RequestedIPs)
	for _, e := range errs {
		fmt.Println(e)
	}
	// Output:
	// true [198.18.128.10 2001:db8::10]
	// metadata.annotations[portico-lb.io/adress-pool]: Invalid value: "default": unknown portico-lb.io/ annotation; did you mean "portico-lb.io/address-pool"?; known keys: portico-lb.io/internal, portico-lb.io/loadBalancerIPs, portico-lb.io/address-pool, portico-lb.io/allow-shared-ip
	// metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled]: Invalid value: "yes": must be "true" or "false"
	// metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval]: Invalid value: "2": must be an integer number of seconds from 5 to 300
}
