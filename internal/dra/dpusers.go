package dra

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultPodResourcesSocket is kubelet's PodResources socket.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// DPHolder is one device-plugin device a pod holds, as kubelet records it.
type DPHolder struct {
	Resource string // extended resource (example.com/sriov_rdma)
	DeviceID string // the device plugin's ID: the VF's PCI address, or a shared slot
	Pod      string // namespace/name
}

// DevicePluginUsers lists the device-plugin devices the node's pods hold.
type DevicePluginUsers interface {
	DevicePluginHolders(ctx context.Context) ([]DPHolder, error)
}

// PodResources asks kubelet's PodResources API (List: the node's active
// pods and the device-plugin devices of their containers).
type PodResources struct {
	Socket string

	once sync.Once
	conn *grpc.ClientConn
	err  error
}

// DevicePluginHolders implements DevicePluginUsers.
func (p *PodResources) DevicePluginHolders(ctx context.Context) ([]DPHolder, error) {
	p.once.Do(func() {
		p.conn, p.err = grpc.NewClient("unix://"+p.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	if p.err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", p.Socket, p.err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := podresourcesapi.NewPodResourcesListerClient(p.conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources List on %s: %w; fix: mount kubelet's pod-resources directory into the agent and give --pod-resources-socket", p.Socket, err)
	}
	var out []DPHolder
	for _, pr := range resp.PodResources {
		for _, c := range pr.Containers {
			for _, d := range c.Devices {
				for _, id := range d.DeviceIds {
					out = append(out, DPHolder{Resource: d.ResourceName, DeviceID: id, Pod: pr.Namespace + "/" + pr.Name})
				}
			}
		}
	}
	return out, nil
}

// Close releases the connection.
func (p *PodResources) Close() error {
	if p.conn != nil {
		return p.conn.Close()
	}
	return nil
}
