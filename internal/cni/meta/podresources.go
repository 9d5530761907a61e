package meta

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Devices is what kubelet allocated to a pod: resource name → device IDs in
// container order, then device order.
type Devices map[string][]string

// DeviceLister asks kubelet which devices a pod holds.
type DeviceLister interface {
	PodDevices(ctx context.Context, namespace, name string) (Devices, error)
}

// PodResourcesClient talks to kubelet's PodResources API on its unix socket.
type PodResourcesClient struct {
	Socket string
	conn   *grpc.ClientConn
}

// NewPodResourcesClient prepares a client (the connection is made lazily).
func NewPodResourcesClient(socket string) (*PodResourcesClient, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", socket, err)
	}
	return &PodResourcesClient{Socket: socket, conn: conn}, nil
}

// Close releases the connection.
func (c *PodResourcesClient) Close() error { return c.conn.Close() }

// PodDevices uses Get (one pod) and falls back to List where kubelet has
// the Get call disabled.
func (c *PodResourcesClient) PodDevices(ctx context.Context, ns, name string) (Devices, error) {
	cl := podresourcesapi.NewPodResourcesListerClient(c.conn)
	resp, err := cl.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: name, PodNamespace: ns})
	if err == nil {
		return collect(resp.PodResources), nil
	}
	if code := status.Code(err); code != codes.Unimplemented && code != codes.Unknown && code != codes.NotFound {
		return nil, fmt.Errorf("kubelet PodResources Get %s/%s on %s: %w", ns, name, c.Socket, err)
	}
	list, err := cl.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources List on %s: %w", c.Socket, err)
	}
	for _, pr := range list.PodResources {
		if pr.Namespace == ns && pr.Name == name {
			return collect(pr), nil
		}
	}
	return Devices{}, nil
}

func collect(pr *podresourcesapi.PodResources) Devices {
	out := Devices{}
	if pr == nil {
		return out
	}
	for _, c := range pr.Containers {
		for _, d := range c.Devices {
			out[d.ResourceName] = append(out[d.ResourceName], d.DeviceIds...)
		}
	}
	return out
}

// requestedExtended lists the pod's extended-resource requests (what it
// asked for), for error messages about mismatched resource names.
func requestedExtended(pod *corev1.Pod) string {
	req := map[string]string{}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for name, q := range rl {
				if strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/") {
					req[string(name)] = q.String()
				}
			}
		}
	}
	if len(req) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + req[k]
	}
	return strings.Join(parts, ", ")
}
