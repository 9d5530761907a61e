package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dpconfig "github.com/rdmanet/rdmanet/internal/deviceplugin/config"
)

// Node labels and the annotation the labeler reads. The labeler owns exactly
// the keys starting with LabelPoolPrefix and LabelNetnsMode; it never writes
// or removes any other label.
const (
	// LabelPoolPrefix + PoolLabelName(resource) = "true" on a node whose
	// capacity has more than zero of that pool's extended resource.
	LabelPoolPrefix = "rdmanet.io/pool."
	// LabelNetnsMode mirrors AnnotationNetnsMode (exclusive or shared).
	LabelNetnsMode = "rdmanet.io/rdma-netns-mode"
	// AnnotationNetnsMode is the RDMA subsystem netns mode the agent reports.
	AnnotationNetnsMode = "rdmanet.io/rdma-netns-mode"
)

// poolHashPrefix starts the label of a resource whose readable form is not
// a valid label key; no readable form contains it ('_' always follows the
// resource prefix, and a resource prefix is a DNS subdomain, without '_').
const poolHashPrefix = "h-"

// PoolLabel returns the node label key of an extended resource name:
//
//	<prefix>/<name>  →  rdmanet.io/pool.<prefix>_<name>
//
// e.g. example.com/sriov_rdma → rdmanet.io/pool.example.com_sriov_rdma. The
// resource prefix is a DNS subdomain, which has no '_', so the first '_'
// after "pool." splits the key back (PoolResource). When that form is not a
// valid label key (longer than 63 characters after "rdmanet.io/", or a name
// ending in '.', '-' or '_'), the key is rdmanet.io/pool.h-<first 20 hex
// digits of the SHA-256 of the resource name>, which cannot be read back.
func PoolLabel(resource string) string {
	key := LabelPoolPrefix + strings.Replace(resource, "/", "_", 1)
	if len(validation.IsQualifiedName(key)) == 0 && !strings.HasPrefix(key, LabelPoolPrefix+poolHashPrefix) {
		return key
	}
	h := sha256.Sum256([]byte(resource))
	return LabelPoolPrefix + poolHashPrefix + hex.EncodeToString(h[:10])
}

// PoolResource reads a PoolLabel key back: the resource name, or ok false
// for a hashed key or a key that is not a pool label.
func PoolResource(key string) (resource string, ok bool) {
	rest, ok := strings.CutPrefix(key, LabelPoolPrefix)
	if !ok {
		return "", false
	}
	prefix, name, ok := strings.Cut(rest, "_")
	if !ok || prefix == "" || name == "" {
		return "", false
	}
	return prefix + "/" + name, true
}

// labelChanges returns the merge patch of a node's labels: key → value to
// set, or nil to remove. pools are the configured resource names; when
// poolsKnown is false (the agent config cannot be read) pool labels are left
// as they are. Only keys the labeler owns are ever in the result.
func labelChanges(labels, annotations map[string]string, capacity corev1.ResourceList, pools []string, poolsKnown bool) map[string]*string {
	want := map[string]string{}
	for _, res := range pools {
		if q, ok := capacity[corev1.ResourceName(res)]; ok && q.Sign() > 0 {
			want[PoolLabel(res)] = "true"
		}
	}
	switch mode := annotations[AnnotationNetnsMode]; mode {
	case "exclusive", "shared":
		want[LabelNetnsMode] = mode
	}
	out := map[string]*string{}
	for k, v := range want {
		if cur, ok := labels[k]; !ok || cur != v {
			out[k] = &v
		}
	}
	for k := range labels {
		if _, keep := want[k]; keep {
			continue
		}
		if k == LabelNetnsMode || (poolsKnown && strings.HasPrefix(k, LabelPoolPrefix)) {
			out[k] = nil
		}
	}
	if !poolsKnown {
		for k := range out {
			if strings.HasPrefix(k, LabelPoolPrefix) {
				delete(out, k)
			}
		}
	}
	return out
}

// configuredPools parses the agent ConfigMap's data the way the agent reads
// its files (config.ParseFile): every key holds a config (config.json in
// deploy/); the pools of all keys are merged. A missing ConfigMap configures
// no pools. warnings are the parser's (keys in another case, unknown keys,
// pools rdmanet skips), each naming the ConfigMap key and the pool.
func configuredPools(cm *corev1.ConfigMap) (pools []string, warnings []keyWarning, err error) {
	if cm == nil {
		return nil, nil, nil
	}
	var sets [][]dpconfig.Pool
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		f, err := dpconfig.ParseFile(configMapOrigin(cm, key), []byte(cm.Data[key]))
		if err != nil {
			return nil, nil, err
		}
		sets = append(sets, f.Pools)
		for _, w := range f.Warnings {
			warnings = append(warnings, keyWarning{Key: key, Warning: w})
		}
	}
	all, err := dpconfig.Merge(sets...)
	if err != nil {
		return nil, nil, err
	}
	if len(all) == 0 && len(warnings) > 0 {
		// the agent refuses a config that leaves it nothing to serve and
		// keeps its previous pools: so do the labels
		var why []string
		for _, w := range warnings {
			if w.Pool != "" {
				why = append(why, w.String())
			}
		}
		return nil, nil, &dpconfig.Error{Origin: "ConfigMap " + cm.Namespace + "/" + cm.Name, Rule: "holds no pool rdmanet serves: " + strings.Join(why, "; "), Fix: "give rdmanet the RDMA pools (netDevice pools of VFs, or rdma-shared-dev-plugin pools)"}
	}
	out := make([]string, 0, len(all))
	for _, p := range all {
		out = append(out, p.Resource())
	}
	return out, warnings, nil
}

// keyWarning is a parser warning of one ConfigMap key.
type keyWarning struct {
	Key string
	dpconfig.Warning
}

func configMapOrigin(cm *corev1.ConfigMap, key string) string {
	return "ConfigMap " + cm.Namespace + "/" + cm.Name + " key " + key
}

// NodeLabeler keeps the rdmanet.io/ labels of every node (see the
// constants above), reconciling a node when its labels, annotations or
// capacity change, and every node when the agent ConfigMap changes.
type NodeLabeler struct {
	Client client.Client
	// Namespace of the agent ConfigMap.
	Namespace string
	// Recorder emits an Event on a node whose labels changed (nil: none).
	Recorder events.EventRecorder

	mu sync.Mutex
	// warned is the ConfigMap version whose warnings were logged: each
	// (re)load of the config logs them once, not once per node.
	warned string
}

// logWarnings logs the config's warnings once per ConfigMap version.
func (r *NodeLabeler) logWarnings(logger logr.Logger, cm *corev1.ConfigMap, warnings []keyWarning) {
	if cm == nil {
		return
	}
	version := string(cm.UID) + "/" + cm.ResourceVersion
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned == version {
		return
	}
	r.warned = version
	for _, w := range warnings {
		logger.Info("agent pool config warning: "+w.String(), "configMap", cm.Namespace+"/"+cm.Name, "file", w.Key, "pool", w.Pool, "field", w.Field, "value", w.Value)
	}
}

// SetupWithManager registers the labeler with mgr (leader-elected).
func (r *NodeLabeler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("node-labels").
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allNodes)).
		Complete(r)
}

// nodeChanged passes node updates that can change the labels' answer.
var nodeChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !maps.Equal(o.Labels, n.Labels) ||
		o.Annotations[AnnotationNetnsMode] != n.Annotations[AnnotationNetnsMode] ||
		!apiequality.Semantic.DeepEqual(o.Status.Capacity, n.Status.Capacity)
}}

// allNodes maps a change of the agent ConfigMap to every node.
func (r *NodeLabeler) allNodes(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetName() != AgentConfigMap || obj.GetNamespace() != r.Namespace {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		log.FromContext(ctx).Error(err, "listing nodes after an agent config change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(nodes.Items))
	for i := range nodes.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
	}
	return out
}

// Reconcile implements reconcile.Reconciler for one node.
func (r *NodeLabeler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	var node corev1.Node
	if err := r.Client.Get(ctx, req.NamespacedName, &node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var cm corev1.ConfigMap
	cmp := &cm
	poolsKnown := true
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: AgentConfigMap}, &cm); apierrors.IsNotFound(err) {
		cmp = nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("read ConfigMap %s/%s: %w", r.Namespace, AgentConfigMap, err)
	}
	pools, warnings, err := configuredPools(cmp)
	if err == nil {
		r.logWarnings(logger, cmp, warnings)
	} else {
		// A broken config leaves the pool labels as they are; a fixed
		// one triggers a new reconcile of every node.
		logger.Error(err, "agent config unreadable: pool labels left unchanged; fix the ConfigMap", "configMap", r.Namespace+"/"+AgentConfigMap)
		poolsKnown = false
	}
	changes := labelChanges(node.Labels, node.Annotations, node.Status.Capacity, pools, poolsKnown)
	if len(changes) == 0 {
		return reconcile.Result{}, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": changes}})
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.Patch(ctx, &node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		gcMetrics.labelPatches.WithLabelValues("error").Inc()
		return reconcile.Result{}, fmt.Errorf("patch labels of node %s: %w", node.Name, err)
	}
	gcMetrics.labelPatches.WithLabelValues("ok").Inc()
	var set, removed []string
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		if v := changes[k]; v != nil {
			set = append(set, k+"="+*v)
		} else {
			removed = append(removed, k)
		}
	}
	logger.Info("updated node labels", "node", node.Name, "set", set, "removed", removed)
	if r.Recorder != nil {
		r.Recorder.Eventf(&node, nil, corev1.EventTypeNormal, "RdmanetLabels", "UpdateLabels", "set %v, removed %v", set, removed)
	}
	return reconcile.Result{}, nil
}
