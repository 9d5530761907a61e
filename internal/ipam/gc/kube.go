package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// KubeCluster answers from the API server.
//
// It lists core/v1 pods and nodes with a plain REST client and decodes only
// the fields GC reads (podList, nodeList). This package is linked into the
// rdmanet-ipam CNI plugin, whose start is on every pod attachment's critical
// path, so it avoids the generated clientset (its scheme registers every API
// group at init and links all of k8s.io/api) and k8s.io/api/core/v1 (4 MB of
// code and package initialisation).
type KubeCluster struct {
	client rest.Interface
}

// NewKubeCluster returns a Cluster over the API server of cfg.
func NewKubeCluster(cfg *rest.Config) (*KubeCluster, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &coreV1
	c.APIPath = "/api"
	c.NegotiatedSerializer = serializer.NewCodecFactory(statusScheme()).WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-ipam gc: kubernetes client: %w", err)
	}
	return &KubeCluster{client: client}, nil
}

// coreV1 is the legacy core group's version ("/api/v1").
var coreV1 = schema.GroupVersion{Version: "v1"}

// statusScheme knows the meta/v1 types of the core group, so the client
// turns error replies (metav1.Status) into API errors. It is built per
// client, not at init, so the CNI path never pays for it.
func statusScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, coreV1)
	return s
}

// podList is the part of a core/v1 PodList that GC reads.
type podList struct {
	metav1.ListMeta `json:"metadata"`
	Items           []struct {
		metav1.ObjectMeta `json:"metadata"`
		Status            struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"items"`
}

// nodeList is the part of a core/v1 NodeList that GC reads.
type nodeList struct {
	Items []struct {
		metav1.ObjectMeta `json:"metadata"`
	} `json:"items"`
}

// Pod phases in which the pod's sandbox is gone (core/v1 PodSucceeded, PodFailed).
const (
	phaseSucceeded = "Succeeded"
	phaseFailed    = "Failed"
)

// list GETs a core/v1 collection and decodes it into out. API errors keep
// their type (apierrors.IsNotFound and friends work on them).
func (k *KubeCluster) list(ctx context.Context, resource string, params map[string]string, out any) error {
	req := k.client.Get().Resource(resource)
	for key, v := range params {
		req = req.Param(key, v)
	}
	res := req.Do(ctx)
	if err := res.Error(); err != nil { // the server's Status, as Into reports it
		return err
	}
	body, _ := res.Raw()
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode %s list: %w", resource, err)
	}
	return nil
}

// networkStatus is the subset of k8s.v1.cni.cncf.io/network-status we read.
type networkStatus struct {
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
}

// Pods implements Cluster.
func (k *KubeCluster) Pods(ctx context.Context) (map[string]Pod, error) {
	out := map[string]Pod{}
	params := map[string]string{"limit": "500"}
	for {
		var list podList
		if err := k.list(ctx, "pods", params, &list); err != nil {
			return nil, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			out[p.Namespace+"/"+p.Name] = Pod{
				UID:      string(p.UID),
				Terminal: p.Status.Phase == phaseSucceeded || p.Status.Phase == phaseFailed,
				IPs:      statusIPs(p.Annotations["k8s.v1.cni.cncf.io/network-status"]),
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		params["continue"] = list.Continue
	}
}

func statusIPs(ann string) map[netip.Addr]bool {
	if ann == "" {
		return nil
	}
	var st []networkStatus
	if err := json.Unmarshal([]byte(ann), &st); err != nil {
		return nil // unreadable status never causes a release
	}
	ips := map[netip.Addr]bool{}
	for _, s := range st {
		for _, ip := range s.IPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				ips[a] = true
			}
		}
	}
	return ips
}

// Nodes implements Cluster.
func (k *KubeCluster) Nodes(ctx context.Context) (map[string]bool, error) {
	var list nodeList
	if err := k.list(ctx, "nodes", nil, &list); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = true
	}
	return out, nil
}
