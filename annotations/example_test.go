package annotations_test

import (
	"fmt"

	"github.com/portico-lb/portico/annotations"
)

func ExampleParse() {
	spec, errs := annotations.Parse(map[string]string{
		annotations.Internal:                  "true",
		annotations.MetalLBLoadBalancerIPs:    "198.18.128.10, 2001:db8::10",
		annotations.SourceRanges:              "10.0.0.1",
		annotations.AWSCrossZoneLoadBalancing: "yes", // the aws provider's key: its ParseOptions judges it
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
	// metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]: Invalid value: "10.0.0.1": a bare IP is not a CIDR; write 10.0.0.1/32 for a single address
}
