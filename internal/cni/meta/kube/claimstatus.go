package kube

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"

	"github.com/rdmanet/rdmanet/internal/cni/meta"
	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// ClaimFieldManager is the server-side-apply field manager of the device
// status the meta CNI writes.
const ClaimFieldManager = "rdmanet-cni"

// SetClaimNetworks applies each claim device's status (server-side apply
// on the status subresource, field manager ClaimFieldManager): condition
// Ready, networkData and, for an InfiniBand attachment, data
// {"infiniband": {"guid", "pkey", "plugin"}} (devinfo.ClaimData). Other
// writers' entries are untouched.
func (k *KubeSource) SetClaimNetworks(ctx context.Context, nets []meta.ClaimNetwork) error {
	var errs []error
	for _, n := range nets {
		dev := resourceapply.AllocatedDeviceStatus().
			WithDriver(n.Driver).WithPool(n.Pool).WithDevice(n.Device).
			WithConditions(metav1apply.Condition().
				WithType("Ready").WithStatus(metav1.ConditionTrue).WithReason("NetworkAttached").
				WithMessage(fmt.Sprintf("rdmanet attached %s of pod %s", n.Interface, n.Pod)).
				WithLastTransitionTime(metav1.Now())).
			WithNetworkData(resourceapply.NetworkDeviceData().
				WithInterfaceName(n.Interface).WithIPs(n.IPs...).WithHardwareAddress(n.MAC))
		if n.ShareID != "" {
			dev = dev.WithShareID(n.ShareID)
		}
		if d := devinfo.ClaimData(n.InfiniBand); d != nil {
			dev = dev.WithData(*d)
		}
		ac := resourceapply.ResourceClaim(n.Claim, n.Namespace).WithStatus(resourceapply.ResourceClaimStatus().WithDevices(dev))
		if _, err := k.Core.ResourceV1().ResourceClaims(n.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: ClaimFieldManager, Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("status of ResourceClaim %s/%s device %s/%s/%s (pod %s, %s): %w", n.Namespace, n.Claim, n.Driver, n.Pool, n.Device, n.Pod, n.Interface, err))
		}
	}
	return errors.Join(errs...)
}

// SetClaimNetworks writes through to the API server.
func (s *CachedSource) SetClaimNetworks(ctx context.Context, nets []meta.ClaimNetwork) error {
	return s.live.SetClaimNetworks(ctx, nets)
}
