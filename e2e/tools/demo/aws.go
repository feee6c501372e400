package main

// The AWS walk-through (-provider=aws, `make demo DEMO=aws`): the same story as the bare-metal
// one, with the load balancers held by moto's AWS emulator instead of VIPs on a LAN.
//
// It starts moto_server 5.2.5 on 127.0.0.1 (e2e/framework/moto; `make prereqs` installs it) and seeds it
// as the AWS tests do: a VPC (198.18.0.0/16) with public and private subnets in two zones tagged
// for the cluster, a node security group, three instances and an ACM certificate. It starts
// etcd and kube-apiserver on loopback, registers one Node per instance (spec.providerID
// aws:///<zone>/<instance>), runs the portico-controller binary with the AWS provider pointed at
// moto (--aws-endpoint) and creates LoadBalancer Services: demo/web-nlb (an NLB),
// demo/web-classic (a Classic ELB), one of another class and one with a bad annotation. It
// prints `kubectl get svc` (the DNS names in EXTERNAL-IP), what `kubectl describe service`
// shows for each, and what moto holds for the two load balancers: listeners, target groups and
// their instances, security groups and their rules, tags. It checks what it shows (every node a
// target on the Service's node ports, ownership tags), so a wrong result ends the demo with an
// error. It then deletes the Services and shows that nothing tagged for the cluster is left.
// It needs neither root nor a network lab; everything it starts is stopped on exit.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/annotations"
	"github.com/portico-lb/portico/e2e/framework/cluster"
	"github.com/portico-lb/portico/e2e/framework/gobuild"
	"github.com/portico-lb/portico/e2e/framework/moto"
	"github.com/portico-lb/portico/e2e/framework/process"
)

const (
	awsClass = "portico-lb.io/demo-aws"
	// awsCluster is --cluster-name: the ownership tag kubernetes.io/cluster/portico-demo.
	awsCluster = "portico-demo"
	// awsSourceRange is the demo Services' loadBalancerSourceRanges: data inside moto only.
	awsSourceRange = "198.19.0.0/16"
)

// awsDemo is what the AWS walk-through works with.
type awsDemo struct {
	ctx   context.Context
	dir   string
	srv   *moto.Server
	f     *moto.Fixture
	c     *cluster.Cluster
	cs    kubernetes.Interface
	ctl   string // the portico-controller binary
	ctlog string // its log
}

func runAWS(ctx context.Context) (err error) {
	d := &awsDemo{ctx: ctx}
	if d.dir, err = cluster.OwnedTempDir("portico-demo-aws-"); err != nil {
		return err
	}
	defer os.RemoveAll(d.dir)

	step("Building portico-controller")
	if d.ctl, err = gobuild.Binary(ctx, "cmd/portico-controller"); err != nil {
		return err
	}

	step("Starting moto's AWS emulator (moto_server " + moto.Version + ") on 127.0.0.1")
	if d.srv, err = moto.StartServer(); err != nil {
		return err
	}
	defer func() {
		if serr := d.srv.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	fmt.Printf("moto at %s (region %s); portico-controller reaches it with --aws-endpoint\n", d.srv.URL, d.srv.Region)
	if err := d.seed(); err != nil {
		return err
	}

	step("Starting a local control plane (etcd, kube-apiserver) on loopback")
	if d.c, err = cluster.Start(ctx, cluster.Options{Controllers: []string{}}); err != nil {
		return err
	}
	defer func() {
		if serr := d.c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	d.cs = d.c.Client()
	fmt.Printf("kube-apiserver at %s\n", d.c.Host())
	if err := d.nodes(); err != nil {
		return err
	}

	step(fmt.Sprintf("Starting portico-controller (provider aws, class %s, --cluster-name=%s, --aws-endpoint=%s)", awsClass, awsCluster, d.srv.URL))
	stop, err := d.startController()
	if err != nil {
		return err
	}
	defer stop()
	if err := d.c.EnsureNamespace(ctx, "demo"); err != nil {
		return err
	}

	hosts, err := d.services()
	if err != nil {
		return err
	}
	if err := d.showAWS(hosts); err != nil {
		return err
	}
	if err := d.deleteAll(); err != nil {
		return err
	}
	step("Done; stopping everything")
	return nil
}

// seed creates the cluster's AWS environment in moto and prints it.
func (d *awsDemo) seed() (err error) {
	step("Seeding moto as an EKS-like cluster " + awsCluster + ": VPC, tagged subnets in two zones, node security group, three instances, an ACM certificate")
	if d.f, err = d.srv.SeedContext(d.ctx, moto.SeedOptions{Cluster: awsCluster, AZs: 2, Nodes: 3}); err != nil {
		return err
	}
	f := d.f
	fmt.Printf("VPC %s (%s), tag %s=shared\n", f.VPCID, moto.VPCCIDR, moto.ClusterTag(awsCluster))
	for i := range f.AZs {
		pub, priv := f.PublicSubnets[i], f.PrivateSubnets[i]
		fmt.Printf("  %s: public subnet %s %s (%s=1), private subnet %s %s (%s=1)\n",
			f.AZs[i], pub.ID, pub.CIDR, moto.RoleELBTag, priv.ID, priv.CIDR, moto.RoleInternalELBTag)
	}
	fmt.Printf("  node security group %s (tag %s=owned)\n", f.NodeSecurityGroupID, moto.ClusterTag(awsCluster))
	for _, n := range f.Nodes {
		fmt.Printf("  instance %s in %s, %s (%s)\n", n.InstanceID, n.AZ, n.PrivateIP, n.Name)
	}
	fmt.Printf("  certificate %s (%s)\n", f.Certificates[0].ARN, f.Certificates[0].Domain)
	return nil
}

// nodes writes one Ready Node per instance, as a kubelet with the AWS cloud provider would.
func (d *awsDemo) nodes() error {
	step("Registering one Node per instance (spec.providerID names the instance)")
	for _, n := range d.f.KubeNodes() {
		status := n.Status
		created, err := d.cs.CoreV1().Nodes().Create(d.ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Node %s: %w", n.Name, err)
		}
		created.Status = status
		if _, err := d.cs.CoreV1().Nodes().UpdateStatus(d.ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("writing status of Node %s: %w", n.Name, err)
		}
		fmt.Printf("  Node %s: providerID %s, InternalIP %s\n", n.Name, n.Spec.ProviderID, status.Addresses[0].Address)
	}
	return nil
}

// startController runs portico-controller against moto and returns the function that stops it.
func (d *awsDemo) startController() (func(), error) {
	d.ctlog = filepath.Join(d.dir, "portico-controller.log")
	args := []string{
		"--kubeconfig=" + d.c.KubeconfigPath(),
		"--class=" + awsClass + "=aws",
		"--cluster-name=" + awsCluster,
		"--aws-endpoint=" + d.srv.URL,
		"--aws-region=" + d.srv.Region,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0",
	}
	// The SDK's default credential chain finds moto's static keys in the environment.
	return startProcess(d.ctl, args, append(os.Environ(), d.srv.Env()...), d.ctlog)
}

// startProcess runs bin in its own process group (a Ctrl-C reaches only the demo, which stops
// it in order) with its output in logPath and environment env (nil: this process's), and returns
// the function that stops it (SIGTERM, SIGKILL after 10 s).
func startProcess(bin string, args, env []string, logPath string) (func(), error) {
	p, err := process.Start(bin, process.Options{Args: args, Env: env, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	return func() { _ = p.Stop(10 * time.Second) }, nil
}

func (d *awsDemo) awsService(name string, cls *string, ann map[string]string) *corev1.Service {
	a := map[string]string{
		annotations.AWSSSLCert:                d.f.Certificates[0].ARN,
		annotations.AWSSSLPorts:               "443",
		annotations.AWSAdditionalResourceTags: "team=demo",
	}
	for k, v := range ann {
		a[k] = v
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", Annotations: a},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: cls,
			Selector:                 map[string]string{"app": "web"},
			LoadBalancerSourceRanges: []string{awsSourceRange},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt32(echoPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// services creates the four Services, waits for the two load balancers, prints `kubectl get
// svc` and describes them all; it returns the DNS name of each load-balanced Service.
func (d *awsDemo) services() (map[string]string, error) {
	nlb := map[string]string{annotations.AWSLoadBalancerType: "nlb"}
	for _, s := range []struct {
		what string
		svc  *corev1.Service
	}{
		{"an NLB (" + annotations.AWSLoadBalancerType + ": nlb)", d.awsService("web-nlb", ptr.To(awsClass), nlb)},
		{"a Classic ELB (no type annotation)", d.awsService("web-classic", ptr.To(awsClass), nil)},
		{"class example.com/other: not Portico's", d.awsService("elsewhere", ptr.To("example.com/other"), nil)},
		{annotations.AWSLoadBalancerType + ": \"nlb-ip\", a value of the AWS Load Balancer Controller", d.awsService("typo", ptr.To(awsClass), map[string]string{annotations.AWSLoadBalancerType: "nlb-ip"})},
	} {
		step(fmt.Sprintf("Creating Service demo/%s: %s", s.svc.Name, s.what))
		if _, err := d.cs.CoreV1().Services("demo").Create(d.ctx, s.svc, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	hosts := map[string]string{}
	for _, name := range []string{"web-nlb", "web-classic"} {
		if err := waitFor(d.ctx, func() bool {
			s, err := d.cs.CoreV1().Services("demo").Get(d.ctx, name, metav1.GetOptions{})
			if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
				return false
			}
			hosts[name] = s.Status.LoadBalancer.Ingress[0].Hostname
			return hosts[name] != ""
		}); err != nil {
			return nil, fmt.Errorf("demo/%s never got a DNS name (controller log: %s): %w", name, d.ctlog, err)
		}
	}
	var bad *corev1.Service
	if err := waitFor(d.ctx, func() bool {
		var err error
		bad, err = d.cs.CoreV1().Services("demo").Get(d.ctx, "typo", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionFalse(bad.Status.Conditions, "portico-lb.io/LoadBalancerReady")
	}); err != nil {
		return nil, fmt.Errorf("demo/typo never got a LoadBalancerReady=False condition (controller log: %s): %w", d.ctlog, err)
	}
	if len(bad.Status.LoadBalancer.Ingress) > 0 {
		return nil, fmt.Errorf("demo/typo, with a bad annotation, got ingress %+v", bad.Status.LoadBalancer.Ingress)
	}
	if err := d.getSvc(); err != nil {
		return nil, err
	}
	// Reuses the bare-metal walk-through's describe (no lab: no endpoints printed).
	bm := &demo{ctx: d.ctx, cs: d.cs}
	for _, name := range []string{"web-nlb", "web-classic", "elsewhere", "typo"} {
		if err := bm.describe(name); err != nil {
			return nil, err
		}
	}
	return hosts, nil
}

// getSvc prints `kubectl get svc -n demo`.
func (d *awsDemo) getSvc() error {
	list, err := d.cs.CoreV1().Services("demo").List(d.ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Println("\n$ kubectl get svc -n demo")
	const format = "%-12s %-13s %-14s %-64s %s\n"
	fmt.Printf(format, "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)")
	for _, s := range list.Items {
		ext := "<pending>"
		if ing := s.Status.LoadBalancer.Ingress; len(ing) > 0 {
			ext = ing[0].Hostname + ing[0].IP
		}
		var ports []string
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		}
		fmt.Printf(format, s.Name, s.Spec.Type, s.Spec.ClusterIP, ext, strings.Join(ports, ","))
	}
	return nil
}

// showAWS prints what moto holds for the two Services and checks it against them.
func (d *awsDemo) showAWS(hosts map[string]string) error {
	lbs, err := d.srv.LoadBalancers(d.ctx)
	if err != nil {
		return err
	}
	var instances []string
	for _, n := range d.f.Nodes {
		instances = append(instances, n.InstanceID)
	}
	sort.Strings(instances)
	nodeSG, err := d.srv.SecurityGroups(d.ctx, d.f.NodeSecurityGroupID)
	if err != nil {
		return err
	}
	for _, name := range []string{"web-nlb", "web-classic"} {
		svc, err := d.cs.CoreV1().Services("demo").Get(d.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(lbs, func(lb moto.LoadBalancer) bool { return lb.DNS == hosts[name] })
		if i < 0 {
			return fmt.Errorf("demo/%s's status names %s, which moto does not hold", name, hosts[name])
		}
		lb := lbs[i]
		step(fmt.Sprintf("What moto holds for demo/%s (found by the DNS name in its status)", name))
		printLB(lb, nodeSG[0])
		if err := checkLB(svc, lb, instances); err != nil {
			return fmt.Errorf("demo/%s: %w", name, err)
		}
	}
	if n := len(lbs); n != 2 {
		return fmt.Errorf("moto holds %d load balancers, want 2 (demo/elsewhere and demo/typo get none)", n)
	}
	fmt.Println("\nmoto holds these two load balancers and no other: demo/elsewhere is another controller's, demo/typo was refused.")
	return nil
}

// printLB prints one load balancer the way the AWS console groups it.
func printLB(lb moto.LoadBalancer, nodeSG moto.SecurityGroup) {
	fmt.Printf("%s load balancer %s, %s\n", lb.Type, lb.Name, lb.Scheme)
	fmt.Printf("  DNS name:      %s\n", lb.DNS)
	for _, l := range lb.Listeners {
		cert := ""
		if l.Cert != "" {
			cert = " with certificate " + l.Cert
		}
		fmt.Printf("  listener:      %s:%d%s -> %s:%d", l.Protocol, l.Port, cert, l.BackendProtocol, l.BackendPort)
		if l.TargetGroup != "" {
			fmt.Printf("\n    target group %s, health check %s, targets %s", l.TargetGroup, l.HealthCheck, strings.Join(l.Targets, ", "))
		}
		fmt.Println()
	}
	if lb.Kind == moto.KindClassicLB {
		fmt.Println("                 (moto 5.2.5 reports each listener's own protocol as the instance protocol;")
		fmt.Println("                 Portico sent TCP, or what aws-load-balancer-backend-protocol names)")
		fmt.Printf("  instances:     %s (health check %s)\n", strings.Join(lb.Instances, ", "), lb.HealthCheck)
	}
	for _, g := range lb.SecurityGroups {
		fmt.Printf("  security group %s (%s), tags %s\n", g.ID, g.Name, tagList(g.Tags))
		for _, r := range g.Rules {
			fmt.Printf("    allow %s\n", r)
		}
	}
	var rules []string
	for _, r := range nodeSG.Rules {
		if strings.Contains(r.Description, "/"+lb.Name+"/") {
			rules = append(rules, r.String())
		}
	}
	if len(rules) > 0 {
		fmt.Printf("  node security group %s (%s), rules for this load balancer:\n", nodeSG.ID, nodeSG.Name)
		for _, r := range rules {
			fmt.Printf("    allow %s\n", r)
		}
	}
	fmt.Printf("  tags:          %s\n", tagList(lb.Tags))
}

// checkLB returns an error if lb does not serve svc: a listener per Service port forwarding to
// its node port with every instance behind it, TLS on 443 with the certificate, the ownership
// tags.
func checkLB(svc *corev1.Service, lb moto.LoadBalancer, instances []string) error {
	var problems []string
	if len(lb.Listeners) != len(svc.Spec.Ports) {
		problems = append(problems, fmt.Sprintf("%d listeners for %d ports", len(lb.Listeners), len(svc.Spec.Ports)))
	}
	for _, p := range svc.Spec.Ports {
		i := slices.IndexFunc(lb.Listeners, func(l moto.Listener) bool { return l.Port == p.Port })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("no listener on %d", p.Port))
			continue
		}
		l := lb.Listeners[i]
		if l.BackendPort != p.NodePort {
			problems = append(problems, fmt.Sprintf("listener %d forwards to %d, not node port %d", p.Port, l.BackendPort, p.NodePort))
		}
		if (p.Port == 443) != (l.Cert != "") {
			problems = append(problems, fmt.Sprintf("listener %d has certificate %q", p.Port, l.Cert))
		}
		if lb.Kind == moto.KindLoadBalancer && !slices.Equal(l.Targets, instances) {
			problems = append(problems, fmt.Sprintf("listener %d targets %v, want %v", p.Port, l.Targets, instances))
		}
	}
	if lb.Kind == moto.KindClassicLB && !slices.Equal(lb.Instances, instances) {
		problems = append(problems, fmt.Sprintf("instances %v, want %v", lb.Instances, instances))
	}
	if lb.Tags[moto.ClusterTag(awsCluster)] != "owned" || lb.Tags["kubernetes.io/service-name"] != "demo/"+svc.Name || lb.Tags["team"] != "demo" {
		problems = append(problems, fmt.Sprintf("tags %s lack ownership or team=demo", tagList(lb.Tags)))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func tagList(tags map[string]string) string {
	var kv []string
	for k, v := range tags {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, " ")
}

// deleteAll deletes the Services and shows that nothing tagged for the cluster is left.
func (d *awsDemo) deleteAll() error {
	step("Deleting the Services: the provider deletes what it created, then the finalizer goes")
	list, err := d.cs.CoreV1().Services("demo").List(d.ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if err := d.cs.CoreV1().Services("demo").Delete(d.ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	if err := waitFor(d.ctx, func() bool {
		l, err := d.cs.CoreV1().Services("demo").List(d.ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	}); err != nil {
		left, _ := d.cs.CoreV1().Services("demo").List(d.ctx, metav1.ListOptions{})
		var names []string
		for _, s := range left.Items {
			names = append(names, s.Name+" "+fmt.Sprint(s.Finalizers))
		}
		return fmt.Errorf("services still there (controller log: %s): %v", d.ctlog, names)
	}
	fmt.Println("The Services are gone.")
	inv, err := d.srv.OwnedContext(d.ctx, awsCluster)
	if err != nil {
		return err
	}
	if len(inv) > 0 {
		return fmt.Errorf("left in moto tagged %s=owned:\n%s", moto.ClusterTag(awsCluster), inv)
	}
	lbs, err := d.srv.LoadBalancers(d.ctx)
	if err != nil {
		return err
	}
	if len(lbs) > 0 {
		return fmt.Errorf("moto still holds %d load balancers", len(lbs))
	}
	nodeSG, err := d.srv.SecurityGroups(d.ctx, d.f.NodeSecurityGroupID)
	if err != nil {
		return err
	}
	for _, r := range nodeSG[0].Rules {
		if strings.HasPrefix(r.Description, "portico/") {
			return fmt.Errorf("node security group keeps rule %s", r)
		}
	}
	fmt.Printf("moto holds no load balancer, listener, target group, security group or address tagged %s=owned,\n", moto.ClusterTag(awsCluster))
	fmt.Printf("and the node security group %s has no rule of Portico's left.\n", d.f.NodeSecurityGroupID)
	return nil
}
