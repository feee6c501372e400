package baremetal_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/portico-lb/portico/providers/baremetal"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkForeignClaims: the scan every Ensure makes of the informer's Services, at 10,000
// Services of which half are another class's with an address each.
func BenchmarkForeignClaims(b *testing.B) {
	other := "other"
	svcs := make([]corev1.Service, 10000)
	for i := range svcs {
		var class *string
		if i%2 == 0 {
			class = &other
		}
		svcs[i] = lbService(fmt.Sprint("s", i), class, time.Now().Unix(), fmt.Sprintf("198.18.%d.%d", i/250, i%250+1))
	}
	owns := func(c *string) bool { return c == nil }
	b.ResetTimer()
	for b.Loop() {
		if n := len(baremetal.ForeignClaims(svcs, owns)); n != 5000 {
			b.Fatalf("%d claims, want 5000", n)
		}
	}
}
