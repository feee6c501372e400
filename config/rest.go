package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// errNoKubeconfig replaces client-go's advice (an environment variable Portico does not read).
var errNoKubeconfig = errors.New("no kubeconfig: pass --kubeconfig=PATH, set $KUBECONFIG, or run inside a cluster with a service account")

// ErrOwnClusterIP is the error of an agent whose API server address is the kubernetes
// Service's ClusterIP: as the node's service proxy, the agent programs that address itself.
var ErrOwnClusterIP = errors.New("the API server address is the kubernetes Service's ClusterIP, which portico-agent itself programs as the node's service proxy")

// notOwnClusterIP refuses host (a rest.Config's Host) when it is the kubernetes Service's
// ClusterIP and port as the kubelet gives them to every pod: KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, confirmed by KUBERNETES_PORT (tcp://IP:PORT), which the kubelet
// sets too. After a node boots, no rule leads that address anywhere until the agent has
// synced, and the agent cannot sync without the API server: the node would stay without
// Services (issue 31, item 7). A pod whose spec points KUBERNETES_SERVICE_HOST at the API
// server's own address keeps the kubelet's KUBERNETES_PORT and passes; outside a pod the
// variables are not set and nothing is refused.
func notOwnClusterIP(host string, getenv func(string) string) error {
	ip, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if ip == "" || port == "" {
		return nil
	}
	svc := net.JoinHostPort(ip, port)
	if getenv("KUBERNETES_PORT") != "tcp://"+svc {
		return nil
	}
	u, err := url.Parse(host)
	if err != nil || u.Host != svc {
		return nil
	}
	return fmt.Errorf("%w (%s, the in-cluster configuration): it leads nowhere when the node boots, before the agent's rules exist; "+
		"give the agent the API server's own address (--master or --kubeconfig; the chart's agent.apiServer)", ErrOwnClusterIP, svc)
}

// restConfig loads the client configuration from kubeconfig (or $KUBECONFIG, or the in-cluster
// service account); master, when set, overrides the API server's address. With master and no
// kubeconfig file inside a pod, the service account's token and CA stay: client-go drops its
// in-cluster fallback as soon as anything is overridden, which would leave a pod that is given
// only the API server's address (a node without kube-proxy) with no credentials.
func restConfig(kubeconfig, master string) (*rest.Config, error) {
	return restConfigFrom(kubeconfig, master, rest.InClusterConfig)
}

func restConfigFrom(kubeconfig, master string, inCluster func() (*rest.Config, error)) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	if master != "" && kubeconfig == "" {
		raw, err := rules.Load()
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		if clientcmdapi.IsConfigEmpty(raw) {
			if cfg, err := inCluster(); err == nil {
				cfg.Host = master
				cfg.QPS, cfg.Burst = 50, 100
				return cfg, nil
			}
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: master}}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errNoKubeconfig
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}
