package aws_test

import "testing"

// TestCCMLifecycle runs the same walk as TestControllerLifecycle through portico-ccm: the stock
// cloud-controller-manager's service controller (class-less Services, its finalizer, stock
// --cluster-name) with the AWS provider configured by the cloud config's aws section.
func TestCCMLifecycle(t *testing.T) {
	for _, kind := range []string{kindNLB, kindClassic} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.class = ""
			p := e.startCCM("")
			lifecycle(t, e, p, kind)
		})
	}
}
