package kube

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
)

// ClaimDeviceResolver maps a DRA device to the network resource it belongs
// to and the deviceID the CNI plugins get: both come from the device's
// attributes in its ResourceSlice (k8s.cni.cncf.io/resourceName and
// k8s.cni.cncf.io/deviceID, which rdmanet's driver publishes and Multus'
// DRA support reads). ok is false for a device that is not a network device
// (a GPU of the same pod).
type ClaimDeviceResolver interface {
	Resolve(ctx context.Context, driver, pool, device string) (resource, deviceID string, ok bool, err error)
}

// PodResourcesClient talks to kubelet's PodResources API on its unix socket.
type PodResourcesClient struct {
	Socket string
	// Claims resolves DRA devices; nil: a pod's DRA devices are ignored.
	Claims ClaimDeviceResolver
	conn   *grpc.ClientConn
	stop   context.CancelFunc // ends KeepConnected's watch
}

// RedialMaxBackoff is the longest pause between two dials of kubelet's
// socket while it is not there (kubelet starting or restarting): gRPC
// re-dials from 1 s, growing by 1.6 per failure up to this.
const RedialMaxBackoff = 5 * time.Second

// NewPodResourcesClient prepares a client. Nothing is dialed yet: the first
// call dials (rdmanet-direct, one call per process), or KeepConnected does
// at once (the daemon).
func NewPodResourcesClient(socket string) (*PodResourcesClient, error) {
	bo := backoff.DefaultConfig
	bo.MaxDelay = RedialMaxBackoff
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo}),
		// a daemon's connection stays up between bursts of pod starts
		grpc.WithIdleTimeout(0))
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", socket, err)
	}
	return &PodResourcesClient{Socket: socket, conn: conn}, nil
}

// KeepConnected dials kubelet now and again whenever the connection is
// lost (kubelet restarts), until Close, so that no call waits on a connect:
// under a burst of ADDs every call would wait on the first one's. It never
// blocks: while kubelet's socket is missing, gRPC re-dials with backoff
// (RedialMaxBackoff) and a call fails at once, as without it.
func (c *PodResourcesClient) KeepConnected() {
	if c.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	c.conn.Connect()
	go func() {
		for {
			s := c.conn.GetState()
			switch s {
			case connectivity.Shutdown:
				return
			case connectivity.Idle: // the connection was lost: dial again now
				c.conn.Connect()
			}
			if !c.conn.WaitForStateChange(ctx, s) {
				return
			}
		}
	}()
}

// Close releases the connection.
func (c *PodResourcesClient) Close() error {
	if c.stop != nil {
		c.stop()
	}
	return c.conn.Close()
}

// PodDevices uses Get (one pod) and falls back to List where kubelet has
// the Get call disabled.
func (c *PodResourcesClient) PodDevices(ctx context.Context, ns, name string) (*meta.Allocation, error) {
	cl := podresourcesapi.NewPodResourcesListerClient(c.conn)
	resp, err := cl.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: name, PodNamespace: ns})
	if err == nil {
		return c.collect(ctx, resp.PodResources)
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
			return c.collect(ctx, pr)
		}
	}
	return &meta.Allocation{Devices: meta.Devices{}}, nil
}

// collect gathers device plugin devices, then DRA devices (each claim
// device once: kubelet lists a claim under every container that uses it).
func (c *PodResourcesClient) collect(ctx context.Context, pr *podresourcesapi.PodResources) (*meta.Allocation, error) {
	out := &meta.Allocation{Devices: meta.Devices{}}
	if pr == nil {
		return out, nil
	}
	var claimDevs []meta.ClaimDevice
	seen := map[meta.ClaimDevice]bool{}
	for _, ctr := range pr.Containers {
		for _, d := range ctr.Devices {
			out.Devices[d.ResourceName] = append(out.Devices[d.ResourceName], d.DeviceIds...)
		}
		for _, dr := range ctr.DynamicResources {
			for _, r := range dr.ClaimResources {
				if r.DeviceName == "" {
					continue
				}
				cd := meta.ClaimDevice{Namespace: dr.ClaimNamespace, Claim: dr.ClaimName, Driver: r.DriverName, Pool: r.PoolName, Device: r.DeviceName, ShareID: r.GetShareId()}
				if !seen[cd] {
					seen[cd] = true
					claimDevs = append(claimDevs, cd)
				}
			}
		}
	}
	for _, cd := range claimDevs {
		if c.Claims == nil {
			out.Unresolved = append(out.Unresolved, cd.String()+" (no ResourceSlice lookup configured)")
			continue
		}
		res, id, ok, err := c.Claims.Resolve(ctx, cd.Driver, cd.Pool, cd.Device)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %s: %w", pr.Namespace, pr.Name, cd, err)
		}
		if !ok {
			out.Unresolved = append(out.Unresolved, cd.String()+" (not a network device: its ResourceSlice gives no "+SliceResourceNameAttr+")")
			continue
		}
		if out.Claims == nil {
			out.Claims = map[string]meta.ClaimDevice{}
		}
		if prev, dup := out.Claims[id]; dup {
			return nil, fmt.Errorf("pod %s/%s: %s and %s both have deviceID %s; fix: the DRA driver must publish a distinct %s per device", pr.Namespace, pr.Name, prev, cd, id, SliceDeviceIDAttr)
		}
		out.Claims[id] = cd
		out.Devices[res] = append(out.Devices[res], id)
	}
	return out, nil
}
