package nodes

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/framework/wait"
)

// DNSServiceIP is the ClusterIP of the kube-dns Service (Options.DNS) and the kubelets'
// clusterDNS: the tenth address of the Service CIDR, as kubeadm picks it.
var DNSServiceIP = netip.MustParseAddr("198.18.0.10")

// DNSDomain is the cluster's DNS domain.
const DNSDomain = "cluster.local"

// corefile serves the cluster's names only: nothing is forwarded (the lab has no way out).
const corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes ` + DNSDomain + ` in-addr.arpa ip6.arpa {
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`

// deployDNS runs CoreDNS in kube-system as a user's cluster does (ServiceAccount and RBAC,
// ConfigMap, Deployment, the kube-dns Service at Cluster.DNSServiceIP, in the primary family)
// and waits until it is Ready.
// With no service proxy in the cluster, CoreDNS reaches the apiserver at its real address
// (KUBERNETES_SERVICE_HOST/PORT override the kubernetes Service's), with its ServiceAccount's
// token and the cluster CA of its projected volume.
func (c *Cluster) deployDNS(ctx context.Context) error {
	cs := c.Client()
	const ns, name = "kube-system", "coredns"
	u, err := url.Parse(c.ControlPlane.Host())
	if err != nil {
		return err
	}
	labels := map[string]string{"k8s-app": "kube-dns"}
	objects := []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e:coredns"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
					{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e:coredns"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "portico-e2e:coredns"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Data:       map[string]string{"Corefile": corefile},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{
					ClusterIP: c.DNSServiceIP().String(),
					Selector:  labels,
					Ports: []corev1.ServicePort{
						{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
						{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							ServiceAccountName: name,
							DNSPolicy:          corev1.DNSDefault,
							PriorityClassName:  "system-cluster-critical",
							Containers: []corev1.Container{{
								Name:            "coredns",
								Image:           c.dnsImage.Ref,
								ImagePullPolicy: corev1.PullNever,
								Args:            []string{"-conf", "/etc/coredns/Corefile"},
								Env: []corev1.EnvVar{
									{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()},
									{Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()},
								},
								Ports: []corev1.ContainerPort{
									{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
									{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
								},
								VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
								ReadinessProbe: &corev1.Probe{
									ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
									PeriodSeconds: 1,
								},
								LivenessProbe: &corev1.Probe{
									ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
									PeriodSeconds:    10,
									FailureThreshold: 5,
								},
							}},
							Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
								ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}},
							}}},
						},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
	}
	// kube-system's ServiceAccount admission needs nothing, but the pod needs the namespace's
	// kube-root-ca.crt (its projected token volume): create first, the kubelet waits for it.
	for _, create := range objects {
		if err := create(); err != nil {
			return fmt.Errorf("deploying CoreDNS: %w", err)
		}
	}
	return wait.Poll(ctx, 200*time.Millisecond, 2*time.Minute, "CoreDNS Ready", func(ctx context.Context) error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas < 1 {
			return fmt.Errorf("%d of %d replicas Ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
		}
		return nil
	})
}

// DNSPod is the address of a Ready CoreDNS pod, for asking it directly: without a service
// proxy, DNSServiceIP leads nowhere.
func (c *Cluster) DNSPod(ctx context.Context) (netip.Addr, error) {
	pods, err := c.Client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return netip.Addr{}, err
	}
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return netip.ParseAddr(p.Status.PodIP)
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("no Ready CoreDNS pod")
}
