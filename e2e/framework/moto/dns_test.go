package moto

import "testing"

func TestNLBDNS(t *testing.T) {
	for in, want := range map[string]string{
		"k8s-a-1234.us-east-1.elb.amazonaws.com": "k8s-a-1234.elb.us-east-1.amazonaws.com",
		"k8s-a-1234.elb.us-east-1.amazonaws.com": "k8s-a-1234.elb.us-east-1.amazonaws.com",
		"example.com":                            "example.com",
	} {
		if got := nlbDNS(in); got != want {
			t.Errorf("nlbDNS(%q) = %q, want %q", in, got, want)
		}
		if !sameDNS(in, want) {
			t.Errorf("sameDNS(%q, %q) = false", in, want)
		}
	}
}
