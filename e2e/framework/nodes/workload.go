package nodes

import (
	"bytes"
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

// EchoPort is the TCP port EchoDeployment's pods serve on.
const EchoPort = 8080

// EchoDeployment is a Deployment named "echo" (pods labelled app=echo) of replicas echo-server
// pods (Cluster.EchoImage, never pulled), spread one per node, Ready once EchoPort accepts.
func (c *Cluster) EchoDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "echo"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name:            "echo",
						Image:           c.EchoImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-tcp", fmt.Sprint(EchoPort)},
						Ports:           []corev1.ContainerPort{{ContainerPort: EchoPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(EchoPort)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Exec runs cmd in pod's first container (the apiserver's exec through the kubelet), for at
// most 30 s, and returns its standard output and error.
func (c *Cluster) Exec(ctx context.Context, pod corev1.Pod, cmd ...string) (string, string, error) {
	req := c.Client().CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: pod.Spec.Containers[0].Name, Command: cmd, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.ControlPlane.Config(), "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String(), stderr.String(), err
}
