package controller

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// stripObject is the cache's transform: it drops managedFields from every
// object, and from pods everything the GC does not read, so the cache of
// every pod in the cluster stays small. The manager's cached client thus
// returns pods with only their identity (namespace, name, UID, labels,
// deletion timestamp), spec.nodeName, spec.hostNetwork and status.phase
// (and the network-status of pods with InfiniBand GUIDs, guidhook.go):
// code needing whole pods reads them with mgr.GetAPIReader().
func stripObject(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return cache.TransformStripManagedFields()(obj)
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta}
	out.Namespace, out.Name, out.UID = p.Namespace, p.Name, p.UID
	out.ResourceVersion, out.Generation = p.ResourceVersion, p.Generation
	out.Labels = p.Labels
	out.Annotations = keepIBStatus(p)
	out.DeletionTimestamp = p.DeletionTimestamp
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.HostNetwork = p.Spec.HostNetwork
	out.Status.Phase = p.Status.Phase
	return out, nil
}
