package providers_test

import (
	"testing"

	"github.com/portico-lb/portico/providers"
)

type optsA struct{ X int }
type optsB struct{ Y string }

func TestOptionsOf(t *testing.T) {
	ref := providers.Ref{Namespace: "ns", Name: "svc"}
	for _, tc := range []struct {
		name    string
		options providers.ServiceOptions
		want    optsA
		wantErr bool
	}{
		{"none", nil, optsA{}, false},
		{"value", optsA{X: 1}, optsA{X: 1}, false},
		{"pointer", &optsA{X: 2}, optsA{X: 2}, false},
		{"another provider's", optsB{Y: "b"}, optsA{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := providers.OptionsOf[optsA](&providers.LoadBalancer{Ref: ref, Options: tc.options}, "a")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("OptionsOf = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
