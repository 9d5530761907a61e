package ibsriov

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/verbs"
	"github.com/rdmanet/rdmanet/internal/guidpool"
	rdmaipam "github.com/rdmanet/rdmanet/internal/ipam"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// teardown undoes ADD from the record, in ib-sriov-cni's order: IPAM, the
// netdev back to the host under its name, the RDMA device back, the VF's
// GUID (and rebind) and link state back, the pool's GUID released (and the
// hook told). podNS may be nil (netns gone). Every step tolerates "already
// undone", so DEL repeats safely.
func (p *Plugin) teardown(r *Record, hostNS, podNS ns.NetNS, stdin []byte) error {
	var errs []error
	if r.Netdev != "" {
		if err := verbs.DelIPAMFor(p.IPAM, r.Conf.IPAMType, stdin, r.Stdin, r.ContainerID, r.IfName); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Netdev != "" && podNS != nil {
		err := podNS.Do(func(ns.NetNS) error {
			name := r.IfName
			if _, err := netops.LinkByName(name); errors.Is(err, netops.ErrLinkNotFound) {
				name = r.Netdev
				if _, err := netops.LinkByName(name); errors.Is(err, netops.ErrLinkNotFound) {
					return nil
				}
			}
			if err := netops.FlushAddrs(name); err != nil {
				return err
			}
			if err := netops.SetLinkDown(name); err != nil {
				return err
			}
			if name != r.Netdev {
				if err := netops.RenameLink(name, r.Netdev); err != nil {
					return err
				}
			}
			return netops.SetLinkNetns(r.Netdev, hostNS)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("move IPoIB netdev out of pod netns %s: %w", r.Netns, err))
		}
	}
	if r.Netdev != "" {
		if l, err := netops.LinkByName(r.Netdev); err == nil {
			if r.NetdevOrigMT != 0 && l.MTU != r.NetdevOrigMT {
				errs = append(errs, netops.SetLinkMTU(r.Netdev, r.NetdevOrigMT))
			}
			if r.NetdevWasUp {
				errs = append(errs, netops.SetLinkUp(r.Netdev))
			}
		} else if errors.Is(err, netops.ErrLinkNotFound) && p.Sysfs.Exists(r.DeviceID) && podNS != nil {
			errs = append(errs, fmt.Errorf("IPoIB netdev %s of %s is in neither the pod nor the host namespace yet; retry DEL: %w", r.Netdev, r.DeviceID, err))
		} else if err != nil && !errors.Is(err, netops.ErrLinkNotFound) {
			errs = append(errs, err)
		}
	}
	if r.RDMAMoved {
		errs = append(errs, p.rdmaBack(r, hostNS, podNS))
	}
	if r.GUID != "" && r.IsVF && r.PF != "" {
		orig, err := guidpool.ParseGUID(r.PortGUID)
		if err != nil || orig == guidpool.Zero {
			orig = guidpool.AllOnes // a fresh VF's zero GUID cannot be set back: ib-sriov-cni resets to all ones
		}
		errs = append(errs, p.setGUID(r, orig))
	}
	if r.Conf.LinkState != "" && r.IsVF && r.PF != "" && r.LinkState != "" {
		errs = append(errs, p.VF.SetVFLinkState(r.PF, r.VFIndex, r.LinkState))
	}
	if err := errors.Join(errs...); err != nil {
		return err // keep the GUID allocated until the VF no longer carries it
	}
	if r.GUIDFromPool {
		if err := p.releaseGUID(r); err != nil {
			return err
		}
	}
	return nil
}

// releaseGUID returns the record's pool GUID and tells the hook; a hook
// failure is logged, not returned (the GUID is free; DEL must not stick).
func (p *Plugin) releaseGUID(r *Record) error {
	pool, err := p.pool()
	if err != nil || pool == nil {
		if err == nil {
			err = fmt.Errorf("the GUID pool config %s is gone", guidpool.DefaultConfigPath)
		}
		return fmt.Errorf("release GUID %s of container %s: %w (the controller's GC frees it once the pod is gone)", r.GUID, r.ContainerID, err)
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	if err := pool.Release(ctx, r.Owner); err != nil {
		return err
	}
	if err := pool.RunHook(ctx, p.hookEvent(guidpool.ActionRelease, r)); err != nil {
		p.warnf("ib-sriov DEL: %v", err)
	}
	return nil
}

func (p *Plugin) rdmaBack(r *Record, hostNS, podNS ns.NetNS) error {
	return verbs.RDMABack(p.RDMA, p.Sysfs, r.RDMADev, r.DeviceID, r.Netns, hostNS, podNS)
}

// reclaim finishes the teardown of a function still recorded for a
// container whose netns is gone; while it exists the function is in use.
func (p *Plugin) reclaim(r *Record, hostNS ns.NetNS) error {
	if _, err := os.Stat(r.Netns); r.Netns == "" || !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s is in use by container %s (ifname %s, netns %s); the device plugin must not hand one function to two pods",
			ErrInUse, r.DeviceID, r.ContainerID, r.IfName, r.Netns)
	}
	p.warnf("ib-sriov ADD: %s is still recorded for container %s, whose netns %s is gone; finishing that teardown first", r.DeviceID, r.ContainerID, r.Netns)
	if err := p.teardown(r, hostNS, nil, nil); err != nil {
		return fmt.Errorf("%w: %s is still held by container %s (netns gone) and finishing its teardown failed: %w", ErrInUse, r.DeviceID, r.ContainerID, err)
	}
	return p.records().Remove(r.DeviceID)
}

// Del gives the function back. It succeeds when there is nothing to do.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := ParseLoose(args.StdinData)
	if err != nil {
		conf = &Config{}
		p.warnf("ib-sriov DEL: %v; using the record", err)
	}
	stdin := args.StdinData
	if conf.IPAMType == "" {
		stdin = nil
	}
	return verbs.RecordDel[Record]{
		Records:     p.records(),
		StrictNetns: true,
		Warnf:       p.warnf,
		Unrecorded: func() error {
			// ADD may have allocated a GUID and died before its record said so:
			// the pool's allocation is keyed by (container, ifname), release it.
			if pool, perr := p.pool(); perr == nil && pool != nil && args.ContainerID != "" && args.IfName != "" {
				owner, _ := rdmaipam.OwnerFromArgs(args.ContainerID, args.IfName, args.Args)
				ctx, cancel := ctxTimeout()
				defer cancel()
				if err := pool.Release(ctx, owner); err != nil {
					return err
				}
			}
			return verbs.DelIPAM(p.IPAM, conf.IPAMType, args.StdinData)
		},
		Undo: func(r *Record, hostNS, podNS ns.NetNS) error { return p.teardown(r, hostNS, podNS, stdin) },
	}.Run(conf.DeviceID, args)
}

// Check verifies the netdev (up, addresses), the RDMA device's place and the
// GUID recorded for the pod.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	conf, rec, prev, err := verbs.CheckRecord(p.records(), ParseLoose, args, func(r *Record) json.RawMessage { return r.Result })
	if err != nil {
		return err
	}
	podNS, err := verbs.OpenPodNS(args.Netns)
	if err != nil {
		return err
	}
	defer podNS.Close()
	if rec.Netdev != "" { // an IB-only function has no netdev and no addresses
		if err := verbs.CheckIPAM(p.IPAM, conf.IPAMType, args.StdinData); err != nil {
			return err
		}
		err = podNS.Do(func(ns.NetNS) error {
			l, err := netops.LinkByName(args.IfName)
			if err != nil {
				return fmt.Errorf("IPoIB interface %s of %s: %w", args.IfName, rec.DeviceID, err)
			}
			if !l.Up {
				return fmt.Errorf("ib-sriov CHECK: %s is down", args.IfName)
			}
			if len(prev.IPs) > 0 {
				return ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if rec.RDMAMoved {
		in, err := p.RDMA.InNetns(rec.RDMADev, podNS)
		if err != nil {
			return err
		}
		if !in {
			return fmt.Errorf("ib-sriov CHECK: RDMA device %s is not in the pod netns %s", rec.RDMADev, args.Netns)
		}
	}
	return nil
}
