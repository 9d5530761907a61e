package meta

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/rdmanet/rdmanet/internal/devinfo"
)

// ClaimStatusDriver is the DRA driver whose claims get the network data of
// their devices in status.devices (KEP-4817): rdmanet's own. The API server
// lets a writer change a driver's device status only with the
// resourceclaims/driver permission for that driver name, which
// deploy/rbac-daemon.yaml grants for this one; another driver's claims
// are left to that driver.
const ClaimStatusDriver = "rdma.rdmanet.io"

// ClaimNetwork is what one attachment tells the claim its device came
// through: the interface in the pod, its addresses (CIDR) and MAC, and for
// an InfiniBand attachment its GUID and PKey (the device status' data).
type ClaimNetwork struct {
	ClaimDevice
	Pod        string              `json:"pod"`
	Interface  string              `json:"interface"`
	IPs        []string            `json:"ips,omitempty"`
	MAC        string              `json:"mac,omitempty"`
	InfiniBand *devinfo.InfiniBand `json:"infiniband,omitempty"`
}

// ClaimStatusSetter is a Source that writes ResourceClaim device status.
type ClaimStatusSetter interface {
	SetClaimNetworks(ctx context.Context, nets []ClaimNetwork) error
}

// claimNetworks collects, for every delegate whose device came from a claim
// of ClaimStatusDriver, its interface, addresses and MAC from its result,
// and the InfiniBand extension of an ib-sriov or ipoib delegate.
func claimNetworks(rec *Record, results []types.Result) ([]ClaimNetwork, error) {
	var out []ClaimNetwork
	for i, d := range rec.Delegates {
		if d.Claim == nil || d.Claim.Driver != ClaimStatusDriver || i >= len(results) || results[i] == nil {
			continue
		}
		r, err := current.NewResultFromResult(results[i])
		if err != nil {
			return nil, fmt.Errorf("network %s (%s): result: %w", d.Network, d.IfName, err)
		}
		n := ClaimNetwork{ClaimDevice: *d.Claim, Pod: rec.Pod, Interface: d.IfName}
		idx := -1
		for j, iface := range r.Interfaces {
			if iface.Sandbox != "" && iface.Name == d.IfName {
				idx, n.MAC = j, iface.Mac
			}
		}
		for _, ip := range r.IPs {
			if ip.Interface == nil || *ip.Interface == idx || idx < 0 {
				n.IPs = append(n.IPs, ip.Address.String())
			}
		}
		n.InfiniBand = devinfo.InfiniBandOf(d.Conf, n.MAC)
		out = append(out, n)
	}
	return out, nil
}
