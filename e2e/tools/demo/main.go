// Command demo shows portico-controller at work on a real, local control plane: it starts etcd
// and kube-apiserver (e2e/cluster), runs the portico-controller binary with the reference
// provider, creates LoadBalancer Services (a valid one, one of another class, one with a bad
// annotation) and prints what `kubectl describe service` would show for each, then deletes the
// first and shows the finalizer releasing it. Everything it starts is stopped on exit.
package main

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/cluster"
)

const class = "portico-lb.io/demo"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatalf("demo: %v", err)
	}
}

func run(ctx context.Context) error {
	step("Starting a local control plane (etcd, kube-apiserver)")
	c, err := cluster.Start(ctx, cluster.Options{Controllers: []string{}})
	if err != nil {
		return err
	}
	defer c.Stop()
	cs := c.Client()

	step("Building and starting portico-controller (provider: reference, class " + class + ")")
	bin := filepath.Join(c.Dir(), "portico-controller")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/portico-controller").CombinedOutput(); err != nil {
		return fmt.Errorf("building portico-controller: %v\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(c.Dir(), "portico-controller.log"))
	if err != nil {
		return err
	}
	ctrlCmd := exec.Command(bin, "--kubeconfig="+c.KubeconfigPath(), "--class="+class+"=reference",
		"--reference-pool=198.18.128.0/28", "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	ctrlCmd.Stdout, ctrlCmd.Stderr = logFile, logFile
	ctrlCmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ctrlCmd.Start(); err != nil {
		return err
	}
	defer func() { _ = ctrlCmd.Process.Signal(syscall.SIGTERM); _ = ctrlCmd.Wait() }()

	for i, ip := range []string{"198.19.0.11", "198.19.0.12"} {
		if _, err := c.RegisterNode(ctx, cluster.NodeSpec{Name: fmt.Sprintf("node-%d", i+1), InternalIPs: []netip.Addr{netip.MustParseAddr(ip)}}); err != nil {
			return err
		}
	}
	if err := c.EnsureNamespace(ctx, "demo"); err != nil {
		return err
	}

	step("Creating Service demo/web (type LoadBalancer, class " + class + ", TCP 80 + UDP 53)")
	if err := create(ctx, cs, "web", ptr.To(class), nil); err != nil {
		return err
	}
	step("Creating Service demo/elsewhere (class example.com/other: not Portico's)")
	if err := create(ctx, cs, "elsewhere", ptr.To("example.com/other"), nil); err != nil {
		return err
	}
	step("Creating Service demo/typo (annotation portico-lb.io/internal: \"yes\")")
	if err := create(ctx, cs, "typo", ptr.To(class), map[string]string{"portico-lb.io/internal": "yes"}); err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool {
		s, err := cs.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) > 0
	}); err != nil {
		return fmt.Errorf("demo/web never got an address (controller log: %s): %w", logFile.Name(), err)
	}
	time.Sleep(time.Second)
	for _, name := range []string{"web", "elsewhere", "typo"} {
		if err := describe(ctx, cs, name); err != nil {
			return err
		}
	}

	step("Deleting demo/web: the provider releases the address, then the finalizer goes")
	if err := cs.CoreV1().Services("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool {
		_, err := cs.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}); err != nil {
		return err
	}
	fmt.Println("demo/web is gone.")
	step("Done; stopping everything")
	return nil
}

func create(ctx context.Context, cs kubernetes.Interface, name string, cls *string, ann map[string]string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", Annotations: ann},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: cls,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
		},
	}
	_, err := cs.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{})
	return err
}

// describe prints the parts of `kubectl describe service` that Portico writes.
func describe(ctx context.Context, cs kubernetes.Interface, name string) error {
	s, err := cs.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("\n$ kubectl describe service -n demo %s   (abridged)\n", name)
	fmt.Printf("Name:                     %s\n", s.Name)
	fmt.Printf("LoadBalancer Class:       %s\n", ptr.Deref(s.Spec.LoadBalancerClass, "<unset>"))
	fmt.Printf("Finalizers:               %s\n", strings.Join(s.Finalizers, ","))
	var ing []string
	for _, i := range s.Status.LoadBalancer.Ingress {
		mode := ""
		if i.IPMode != nil {
			mode = " (" + string(*i.IPMode) + ")"
		}
		ing = append(ing, i.IP+i.Hostname+mode)
	}
	fmt.Printf("LoadBalancer Ingress:     %s\n", strings.Join(ing, ", "))
	for _, cond := range s.Status.Conditions {
		fmt.Printf("Condition:                %s=%s  %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	evs, err := cs.CoreV1().Events("demo").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err
	}
	fmt.Println("Events:")
	if len(evs.Items) == 0 {
		fmt.Println("  <none>")
	}
	for _, e := range evs.Items {
		fmt.Printf("  %-8s %-22s %s\n", e.Type, e.Reason, e.Message)
	}
	return nil
}

func waitFor(ctx context.Context, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }
