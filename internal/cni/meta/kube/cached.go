package kube

import (
	"context"
	"fmt"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadinformers "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/informers/externalversions"
	nadlisters "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/listers/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// CachedSource serves pods and NADs from informer caches (the node's pods
// only, every NAD) and falls back to a live read on a cache miss, so a pod
// created a moment ago is still found. Writes go to the API server.
type CachedSource struct {
	live *KubeSource
	pods corelisters.PodLister
	nads nadlisters.NetworkAttachmentDefinitionLister
}

// NewCachedSource starts the informers and waits for their first sync
// (bounded by ctx).
func NewCachedSource(ctx context.Context, live *KubeSource, nodeName string) (*CachedSource, error) {
	opts := []informers.SharedInformerOption{}
	if nodeName != "" {
		opts = append(opts, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
		}))
	}
	cf := informers.NewSharedInformerFactoryWithOptions(live.Core, 10*time.Minute, opts...)
	nf := nadinformers.NewSharedInformerFactory(live.NADs, 10*time.Minute)
	podInf := cf.Core().V1().Pods()
	nadInf := nf.K8sCniCncfIo().V1().NetworkAttachmentDefinitions()
	s := &CachedSource{live: live, pods: podInf.Lister(), nads: nadInf.Lister()}
	pi, ni := podInf.Informer(), nadInf.Informer()
	cf.Start(ctx.Done())
	nf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pi.HasSynced, ni.HasSynced) {
		return nil, fmt.Errorf("informer caches of pods (node %q) and NetworkAttachmentDefinitions did not sync: %w", nodeName, ctx.Err())
	}
	return s, nil
}

func (s *CachedSource) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p, err := s.pods.Pods(ns).Get(name)
	if err == nil {
		return p.DeepCopy(), nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	return s.live.Pod(ctx, ns, name)
}

// PodLive reads the pod from the API server, bypassing the cache.
func (s *CachedSource) PodLive(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return s.live.Pod(ctx, ns, name)
}

func (s *CachedSource) NAD(ctx context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	n, err := s.nads.NetworkAttachmentDefinitions(ns).Get(name)
	if err == nil {
		return n.DeepCopy(), nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("NAD cache: %w", err)
	}
	return s.live.NAD(ctx, ns, name)
}

// NADCached answers from the synced cache only; a miss is meta.ErrNotFound.
func (s *CachedSource) NADCached(_ context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	n, err := s.nads.NetworkAttachmentDefinitions(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s (cache): %w", ns, name, meta.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("NAD cache: %w", err)
	}
	return n.DeepCopy(), nil
}

func (s *CachedSource) SetNetworkStatus(ctx context.Context, ns, name string, uid k8stypes.UID, st []devinfo.NetworkStatus) error {
	return s.live.SetNetworkStatus(ctx, ns, name, uid, st)
}
