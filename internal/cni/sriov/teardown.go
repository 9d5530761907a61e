package sriov

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// teardown undoes ADD from the record: IPAM release, netdev back to the
// host namespace under its original name, MAC and MTU, VF settings back.
// podNS may be nil (netns gone). Every step tolerates "already undone".
func (p *Plugin) teardown(r *Record, hostNS, podNS ns.NetNS, stdin []byte) error {
	var errs []error
	if err := verbs.DelIPAMFor(p.IPAM, r.Conf.IPAMType, stdin, r.Stdin, r.ContainerID, r.IfName); err != nil {
		errs = append(errs, err)
	}
	macs := []string{r.PodMAC, r.NetdevMAC, r.Conf.MAC}
	// find looks for the VF netdev by name (the given order), then by MAC.
	// The pod's interface name identifies it inside the pod only: in the
	// host, the kernel returns every VF of a destroyed namespace under its
	// pod name (or dev<N> when taken), so a "net1" there may be another
	// pod's VF. There it is searched by the original name (which only
	// this VF can take back) and by MAC.
	find := func(names ...string) (netops.Link, error) {
		for _, n := range names {
			l, err := netops.LinkByName(n)
			if err == nil {
				return l, nil
			}
			if !errors.Is(err, netops.ErrLinkNotFound) {
				return l, err
			}
		}
		ls, err := netops.Links()
		if err != nil {
			return netops.Link{}, err
		}
		for _, m := range macs {
			hw, err := net.ParseMAC(m)
			if err != nil || isZeroMAC(hw) {
				continue // an unset VF MAC identifies nothing
			}
			var match []netops.Link
			for _, l := range ls {
				if l.MAC.String() == hw.String() && l.Kind != "macvlan" {
					match = append(match, l)
				}
			}
			if len(match) == 1 { // two links with one MAC: neither is known to be this VF
				return match[0], nil
			}
		}
		return netops.Link{}, netops.ErrLinkNotFound
	}
	movedBack := false
	if podNS != nil {
		err := podNS.Do(func(ns.NetNS) error {
			l, err := find(r.IfName, r.Netdev)
			if errors.Is(err, netops.ErrLinkNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := netops.FlushAddrs(l.Name); err != nil {
				return err
			}
			if err := netops.SetLinkDown(l.Name); err != nil {
				return err
			}
			// Take the original name back inside the pod: other VFs return to
			// the host concurrently, and two "net1" cannot meet there.
			if err := netops.RenameLink(l.Name, r.Netdev); err != nil {
				return err
			}
			if err := netops.SetLinkNetns(r.Netdev, hostNS); err != nil {
				return err
			}
			movedBack = true
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("move VF netdev out of pod netns %s: %w", r.Netns, err))
		}
	}
	l, err := find(r.Netdev)
	switch {
	case err == nil:
		if l.Name != r.Netdev {
			if e := netops.SetLinkDown(l.Name); e != nil {
				errs = append(errs, e)
			} else if e := netops.RenameLink(l.Name, r.Netdev); e != nil {
				errs = append(errs, e)
			}
		}
		if hw, e := net.ParseMAC(r.NetdevMAC); e == nil && l.MAC.String() != r.NetdevMAC {
			errs = append(errs, netops.SetLinkMAC(r.Netdev, hw))
		}
		if r.MTU != 0 && l.MTU != r.MTU {
			errs = append(errs, netops.SetLinkMTU(r.Netdev, r.MTU))
		}
		if !movedBack {
			errs = append(errs, netops.FlushAddrs(r.Netdev))
		}
		if r.Up {
			errs = append(errs, netops.SetLinkUp(r.Netdev))
		} else {
			errs = append(errs, netops.SetLinkDown(r.Netdev))
		}
	case errors.Is(err, netops.ErrLinkNotFound):
		if p.Sysfs.Exists(r.DeviceID) {
			errs = append(errs, fmt.Errorf("VF %s netdev (%s, pod name %s) is in neither the pod nor the host namespace yet; "+
				"a physical netdev returns to the host when its namespace is destroyed — retry DEL: %w", r.DeviceID, r.Netdev, r.IfName, err))
		} else {
			p.warnf("sriov DEL: VF %s no longer exists (VFs re-created?); dropping its cache", r.DeviceID)
		}
	default:
		errs = append(errs, err)
	}
	errs = append(errs, p.restoreVF(r))
	return errors.Join(errs...)
}

// reclaim handles a VF that is still recorded for another container. When
// that container's network namespace is gone, its sandbox is gone: its DEL
// ran and left this VF's teardown pending (the meta plugin retries it), and
// the kernel has returned the netdev to the host. The VF has been handed to
// this pod since (kubelet gives a new sandbox of the pod the same device),
// so the teardown is finished here, under the VF's lock: netdev, VF
// settings and the old container's address restored, the record removed.
// While the namespace exists, the VF is in use and ADD fails.
func (p *Plugin) reclaim(r *Record, hostNS ns.NetNS) error {
	if r.Netns == "" || !netnsGone(r.Netns) {
		return fmt.Errorf("%w: VF %s is in use by container %s (ifname %s, netns %s); the device plugin must not hand one VF to two pods — check the kubelet checkpoint and the pool",
			ErrVFInUse, r.DeviceID, r.ContainerID, r.IfName, r.Netns)
	}
	p.warnf("sriov ADD: VF %s is still recorded for container %s, whose netns %s is gone (its DEL is pending); finishing that teardown first", r.DeviceID, r.ContainerID, r.Netns)
	if err := p.teardown(r, hostNS, nil, nil); err != nil {
		return fmt.Errorf("%w: VF %s is still held by container %s, whose netns %s is gone, and finishing its teardown failed (retry; the meta plugin's pending DEL retries it too): %w",
			ErrVFInUse, r.DeviceID, r.ContainerID, r.Netns, err)
	}
	return p.records().Remove(r.DeviceID)
}

func isZeroMAC(hw net.HardwareAddr) bool {
	for _, b := range hw {
		if b != 0 {
			return false
		}
	}
	return true
}

// netnsGone reports whether a network namespace path no longer exists.
func netnsGone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}
