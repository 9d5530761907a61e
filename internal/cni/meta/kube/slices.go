package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// The ResourceSlice attributes that make a DRA device a network device for
// the meta CNI: the resource name a NAD's k8s.v1.cni.cncf.io/resourceName
// must equal (the device plugin pool's name for rdmanet's driver), and the
// deviceID the CNI plugins get (the VF's PCI address). rdmanet's driver
// publishes both; Multus' DRA support reads the same two.
const (
	SliceResourceNameAttr = "k8s.cni.cncf.io/resourceName"
	SliceDeviceIDAttr     = "k8s.cni.cncf.io/deviceID"
)

// sliceTTL bounds how long a pool's devices are served from the cache
// without asking the API server; a device missing from the cache is always
// looked up again.
const sliceTTL = time.Minute

// SliceResolver is the ClaimDeviceResolver over the API server's
// ResourceSlices: it lists the slices of one (driver, pool), field-selected,
// and caches their devices' network attributes, so a daemon asks once per
// pool and minute rather than once per ADD.
//
// With NodeName set, the list first selects the node's own slices too
// (spec.nodeName, which the API server's watch cache indexes: the list
// reads one node's slices, not every slice of the fleet, which at
// thousands of nodes timed lists out); a device not found there (a
// network-attached pool: slices with allNodes or a nodeSelector) is looked
// up in the pool's slices wherever they are.
type SliceResolver struct {
	Client   kubernetes.Interface
	NodeName string
	now      func() time.Time

	mu    sync.Mutex
	pools map[string]*slicePool // driver + "/" + pool
}

type slicePool struct {
	fetched time.Time
	devices map[string]sliceDevice
}

type sliceDevice struct {
	resource, deviceID string
}

// NewSliceResolver returns a resolver over client for the devices of node
// ("": the pools' slices wherever they are).
func NewSliceResolver(client kubernetes.Interface, node string) *SliceResolver {
	return &SliceResolver{Client: client, NodeName: node, now: time.Now, pools: map[string]*slicePool{}}
}

// Resolve returns the device's resource name and deviceID from its
// ResourceSlice. A device without a resourceName attribute is not a network
// device (ok false); one with a resourceName but no deviceID is an error.
func (r *SliceResolver) Resolve(ctx context.Context, driver, pool, device string) (string, string, bool, error) {
	key := driver + "/" + pool
	r.mu.Lock()
	p := r.pools[key]
	r.mu.Unlock()
	d, found := sliceDevice{}, false
	if p != nil && r.now().Sub(p.fetched) < sliceTTL {
		d, found = p.devices[device]
	}
	if !found {
		fresh, err := r.fetch(ctx, driver, pool, device)
		if err != nil {
			return "", "", false, err
		}
		r.mu.Lock()
		r.pools[key] = fresh
		r.mu.Unlock()
		if d, found = fresh.devices[device]; !found {
			return "", "", false, fmt.Errorf("no ResourceSlice of driver %s, pool %s has device %s (the driver withdrew it, or the pool moved on to a newer generation); kubelet's allocation is stale: fix: check `kubectl get resourceslices --field-selector spec.driver=%s,spec.pool.name=%s -o yaml`",
				driver, pool, device, driver, pool)
		}
	}
	if d.resource == "" {
		return "", "", false, nil
	}
	if d.deviceID == "" {
		return "", "", false, fmt.Errorf("ResourceSlice device %s/%s/%s has %s %q but no %s: the CNI plugins need the device's PCI address; fix: the DRA driver must publish %s",
			driver, pool, device, SliceResourceNameAttr, d.resource, SliceDeviceIDAttr, SliceDeviceIDAttr)
	}
	return d.resource, d.deviceID, true, nil
}

// fetch lists the pool's slices (the node's own first, see SliceResolver)
// and keeps the devices of its newest generation (a driver replacing a pool
// publishes the new generation before deleting the old one).
func (r *SliceResolver) fetch(ctx context.Context, driver, pool, device string) (*slicePool, error) {
	sel := []fields.Selector{
		fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorDriver, driver),
		fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorPoolName, pool),
	}
	if r.NodeName != "" {
		p, err := r.list(ctx, driver, pool, append(sel, fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, r.NodeName)))
		if err != nil {
			return nil, err
		}
		if _, ok := p.devices[device]; ok {
			return p, nil
		}
	}
	return r.list(ctx, driver, pool, sel)
}

func (r *SliceResolver) list(ctx context.Context, driver, pool string, sel []fields.Selector) (*slicePool, error) {
	list, err := r.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(sel...).String()})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of driver %s, pool %s (the daemon's identity needs resourceslices list, deploy/rbac-daemon.yaml): %w", driver, pool, err)
	}
	var gen int64
	for i := range list.Items {
		gen = max(gen, list.Items[i].Spec.Pool.Generation)
	}
	p := &slicePool{fetched: r.now(), devices: map[string]sliceDevice{}}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Pool.Generation != gen {
			continue
		}
		for _, dev := range s.Spec.Devices {
			p.devices[dev.Name] = sliceDevice{
				resource: stringAttr(dev.Attributes, SliceResourceNameAttr),
				deviceID: stringAttr(dev.Attributes, SliceDeviceIDAttr),
			}
		}
	}
	return p, nil
}

func stringAttr(attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, name resourcev1.QualifiedName) string {
	if a, ok := attrs[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}
