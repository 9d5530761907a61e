// Package kube holds the meta plugin's Kubernetes and kubelet clients: the
// API server's pods, NADs and network-status writes (KubeSource, and
// CachedSource over informer caches), kubelet's PodResources
// (PodResourcesClient), the DRA ResourceSlice lookup (SliceResolver) and
// ResourceClaim device status, and the pods' Events (KubeEvents). They
// implement the interfaces of package meta (Source, DeviceLister,
// ClaimStatusSetter); meta itself links no API client.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/internal/kubeclient"
	"github.com/rdmanet/rdmanet/internal/nodetoken"
)

// KubeSource reads pods and NADs from the API server.
type KubeSource struct {
	Core kubernetes.Interface
	NADs nadclient.Interface
}

// NewKubeSource builds clients from a kubeconfig file.
func NewKubeSource(kubeconfig string, qps float32) (*KubeSource, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	// The node's token expires (docs/security.md): past its expiry, fail
	// closed here naming the file, not with the API server's bare 401.
	if err := nodetoken.Check(cfg.BearerTokenFile, time.Now()); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	if qps > 0 {
		cfg.QPS, cfg.Burst = qps, int(qps*2)
	}
	cfg.UserAgent = "rdmanet-cni"
	// every request but the informers' watches ends within 30 s
	kubeclient.BoundRequests(cfg, kubeclient.DefaultRequestTimeout)
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	nads, err := nadclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("NAD client: %w", err)
	}
	return &KubeSource{Core: core, NADs: nads}, nil
}

func (k *KubeSource) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p, err := k.Core.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, meta.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	return p, nil
}

func (k *KubeSource) NAD(ctx context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	n, err := k.NADs.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", ns, name, meta.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get NetworkAttachmentDefinition %s/%s: %w", ns, name, err)
	}
	return n, nil
}

func (k *KubeSource) SetNetworkStatus(ctx context.Context, ns, name string, uid k8stypes.UID, status []devinfo.NetworkStatus) error {
	b, err := json.MarshalIndent(status, "", "    ")
	if err != nil {
		return fmt.Errorf("encode network-status: %w", err)
	}
	// A merge patch on one annotation, with the UID as a precondition:
	// nothing else on the pod is touched, and a recreated pod is not written.
	patch := map[string]any{"metadata": map[string]any{
		"uid":         string(uid),
		"annotations": map[string]string{meta.NetworkStatusAnnotation: string(b)},
	}}
	pb, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = k.Core.CoreV1().Pods(ns).Patch(ctx, name, k8stypes.MergePatchType, pb, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("set network-status on pod %s/%s: %w", ns, name, err)
	}
	return nil
}
