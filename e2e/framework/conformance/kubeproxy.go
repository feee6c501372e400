package conformance

import (
	"context"
	"fmt"
	"net/url"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/portico-lb/portico/e2e/framework/wait"
)

// KubeProxyMode is a kube-proxy --proxy-mode: the two that run on Linux here.
type KubeProxyMode string

// The kube-proxy modes of the comparison columns.
const (
	IPTables KubeProxyMode = "iptables"
	NFTables KubeProxyMode = "nftables"
)

// kubeProxyName names the DaemonSet, its ServiceAccount and its binding in kube-system.
const kubeProxyName = "kube-proxy"

// InstallKubeProxy runs kube-proxy of the cluster's version as a DaemonSet in kube-system, as
// kubeadm sets it up in substance (its own ServiceAccount bound to the built-in
// system:node-proxier role, hostNetwork, privileged, /run/xtables.lock shared with the node),
// in mode, from image (ImagePullPolicy Never), and waits until it is Ready on nodes nodes.
// apiServer is the apiserver's real URL: the kubernetes Service's ClusterIP leads nowhere
// before a service proxy runs. It keeps the node's conntrack settings (the nodes are network
// namespaces of one machine: nf_conntrack_max is not theirs to set) and takes each node's
// pod CIDR as the local traffic (--detect-local-mode=NodeCIDR).
func InstallKubeProxy(ctx context.Context, cs kubernetes.Interface, apiServer, image string, mode KubeProxyMode, nodes int) error {
	const ns = "kube-system"
	u, err := url.Parse(apiServer)
	if err != nil {
		return fmt.Errorf("parsing the apiserver URL: %w", err)
	}
	labels := map[string]string{"k8s-app": kubeProxyName}
	hostPathType := corev1.HostPathFileOrCreate
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: kubeProxyName, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: kubeProxyName,
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            kubeProxyName,
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Command: []string{"/usr/local/bin/kube-proxy",
							"--proxy-mode=" + string(mode),
							"--hostname-override=$(NODE_NAME)",
							"--detect-local-mode=NodeCIDR",
							"--conntrack-max-per-core=0",
							"--conntrack-tcp-timeout-established=0",
							"--conntrack-tcp-timeout-close-wait=0",
							"--v=1",
						},
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()},
							{Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()},
						},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts:    []corev1.VolumeMount{{Name: "xtables-lock", MountPath: "/run/xtables.lock"}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(10256)}},
							PeriodSeconds: 1,
						},
					}},
					Volumes: []corev1.Volume{{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/run/xtables.lock", Type: &hostPathType},
					}}},
				},
			},
		},
	}
	creates := []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: kubeProxyName}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "portico-e2e:kube-proxy"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-proxier"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: kubeProxyName}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range creates {
		if err := create(); err != nil {
			return fmt.Errorf("installing kube-proxy: %w", err)
		}
	}
	return WaitDaemonSet(ctx, cs, ns, kubeProxyName, nodes)
}

// WaitDaemonSet waits until DaemonSet ns/name has a Ready pod on each of nodes nodes.
func WaitDaemonSet(ctx context.Context, cs kubernetes.Interface, ns, name string, nodes int) error {
	return wait.Poll(ctx, 500*time.Millisecond, 3*time.Minute, fmt.Sprintf("DaemonSet %s/%s Ready on %d nodes", ns, name, nodes), func(ctx context.Context) error {
		d, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if int(d.Status.NumberReady) < nodes {
			return fmt.Errorf("%d of %d pods Ready (%d scheduled)", d.Status.NumberReady, nodes, d.Status.CurrentNumberScheduled)
		}
		return nil
	})
}
