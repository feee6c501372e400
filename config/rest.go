package config

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// errNoKubeconfig replaces client-go's advice (an environment variable Portico does not read).
var errNoKubeconfig = errors.New("no kubeconfig: pass --kubeconfig=PATH, set $KUBECONFIG, or run inside a cluster with a service account")

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
