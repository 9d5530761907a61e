package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
)

// RecordDel is the DEL of a plugin that keeps a record per device
// (vfrecord: sriov, rdma, ib-sriov).
type RecordDel[R any] struct {
	Records vfrecord.Store[R]
	// Device is the device (PCI address) a record is of; nil for a record
	// type that embeds vfrecord.Attachment.
	Device func(*R) string
	// StrictNetns is DelStep's.
	StrictNetns bool
	// Warnf reports what DEL tolerated (nil discards).
	Warnf func(format string, args ...any)
	// Unrecorded, when set, runs when the attachment has no record.
	Unrecorded func() error
	// Undo undoes the ADD of record r; the record is removed after it.
	Undo func(r *R, hostNS, podNS ns.NetNS) error
}

// Run finds the record of the call's attachment (deviceID is the config's;
// "" scans the state dir) and, under the device's lock, re-reads it (a
// concurrent DEL may have removed it: then there is nothing to do), undoes
// it and removes it. With no record (ADD never wrote one, or a DEL already
// ran) it removes what a record write cut short left (a failure there is
// only warned of) and runs Unrecorded.
func (d RecordDel[R]) Run(deviceID string, args *skel.CmdArgs) error {
	rec, err := d.Records.Find(deviceID, args.ContainerID, args.IfName)
	if errors.Is(err, os.ErrNotExist) {
		if err := d.Records.ClearCutShort(deviceID); err != nil && d.Warnf != nil {
			d.Warnf("%s DEL: %v", d.Records.Plugin, err)
		}
		if d.Unrecorded != nil {
			return d.Unrecorded()
		}
		return nil
	}
	if err != nil {
		return err
	}
	device := d.Device
	if device == nil {
		device = d.Records.Device
	}
	bdf := device(rec)
	return DelStep{
		Lock: d.Records.LockPath(bdf),
		Reread: func() (err error) {
			rec, err = d.Records.Find(bdf, args.ContainerID, args.IfName)
			return err
		},
		Netns:       args.Netns,
		StrictNetns: d.StrictNetns,
		Undo: func(hostNS, podNS ns.NetNS) error {
			if err := d.Undo(rec, hostNS, podNS); err != nil {
				return err
			}
			return d.Records.Remove(bdf)
		},
	}.Run()
}

// DeviceConfig is a config that may name the device (a PCI address) an
// attachment is of.
type DeviceConfig interface {
	// Device is the device the config names; "" when none.
	Device() string
}

// CheckRecord is the start of a CHECK of a plugin that keeps a record per
// device: the config (parse, the plugin's ParseLoose), the record of the
// call's attachment (of the config's device, else found in the state dir)
// and the result its ADD recorded, which result reads from the record
// (nil, or an empty result: none).
func CheckRecord[C DeviceConfig, R any](records vfrecord.Store[R], parse func([]byte) (C, error), args *skel.CmdArgs, result func(*R) json.RawMessage) (conf C, rec *R, prev *current.Result, err error) {
	if conf, err = parse(args.StdinData); err != nil {
		return conf, nil, nil, err
	}
	if rec, err = records.Find(conf.Device(), args.ContainerID, args.IfName); err != nil {
		return conf, nil, nil, fmt.Errorf("%s CHECK: %w", records.Plugin, err)
	}
	prev = &current.Result{}
	if result == nil {
		return conf, rec, prev, nil
	}
	if raw := result(rec); len(raw) > 0 {
		if err := json.Unmarshal(raw, prev); err != nil {
			return conf, nil, nil, fmt.Errorf("%s CHECK: recorded result: %w", records.Plugin, err)
		}
	}
	return conf, rec, prev, nil
}
