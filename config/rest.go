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
// service account); master, when set, overrides the API server's address.
func restConfig(kubeconfig, master string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
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
