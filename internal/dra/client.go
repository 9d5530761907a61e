package dra

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/internal/kubeclient"
)

// NewClient returns an API client from the kubeconfig file at path, or the
// pod's in-cluster identity when path is empty. Its requests other than
// watches end within kubeclient.DefaultRequestTimeout.
func NewClient(path string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("dra: in-cluster API config: %w; fix: run in a pod with a service account token, or give --kubeconfig", err)
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("dra: kubeconfig %s: %w; fix: point --kubeconfig at a readable kubeconfig", path, err)
		}
	}
	cfg.UserAgent = "rdmanet-agent/dra"
	// every request but the ResourceSlice controller's watches ends within
	// the bound (rest.Config.Timeout would cut the watches too)
	kubeclient.BoundRequests(cfg, kubeclient.DefaultRequestTimeout)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dra: API client: %w", err)
	}
	return c, nil
}
