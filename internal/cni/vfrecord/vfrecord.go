// Package vfrecord is the record store the plugins that hand a pod a
// device (sriov, rdma, ib-sriov) keep in their state dir: one JSON file per
// VF, named by its PCI address (<bdf>.json), holding what DEL needs to undo
// the ADD (the record types embed Attachment, and Call when the ADD ran
// IPAM), and the VF's lock file beside it (<bdf>.lock). A record is written
// and removed only under the VF's lock.
package vfrecord

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// Attachment is what every record says of the attachment it is of. The
// plugins' record types embed it (its keys are then the record's own), and
// a Store of such records needs no Owner.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	Netns       string `json:"netns"`
	// DeviceID is the device (PCI address) the record is of.
	DeviceID string `json:"deviceID"`
}

// AttachmentOf is the attachment of a CNI call (args) to the device bdf.
func AttachmentOf(args *skel.CmdArgs, bdf string) Attachment {
	return Attachment{ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns, DeviceID: bdf}
}

func (a *Attachment) attachment() *Attachment { return a }

// Call is what a record keeps of the ADD that wrote it, for DEL (its config)
// and CHECK (its result); the record types of the plugins that run IPAM
// embed it.
type Call struct {
	Stdin  []byte          `json:"stdin"`
	Result json.RawMessage `json:"result,omitempty"`
}

// attached is a record type that embeds Attachment.
type attached interface{ attachment() *Attachment }

// Store is the record store of one plugin; R is its record type.
type Store[R any] struct {
	// Dir is the plugin's state dir.
	Dir string
	// Plugin names the plugin in messages ("<Plugin> cache: ...").
	Plugin string
	// CorruptHint follows "is corrupt" in the error of a record that does
	// not parse, e.g. " (remove it after checking the VF by hand)".
	CorruptHint string
	// NameCaller has the error for a VF recorded for another container
	// name the caller's container too (", not <containerID>").
	NameCaller bool
	// Owner returns the container ID and interface name a record is of;
	// nil for a record type that embeds Attachment.
	Owner func(*R) (containerID, ifName string)
}

// owner is the container ID and interface name r is of.
func (s Store[R]) owner(r *R) (containerID, ifName string) {
	if s.Owner != nil {
		return s.Owner(r)
	}
	a := any(r).(attached).attachment()
	return a.ContainerID, a.IfName
}

// Device is the device of r, a record that embeds Attachment.
func (s Store[R]) Device(r *R) string { return any(r).(attached).attachment().DeviceID }

// Path is the record file of the VF bdf.
func (s Store[R]) Path(bdf string) string { return filepath.Join(s.Dir, bdf+".json") }

// LockPath is the lock file of the VF bdf.
func (s Store[R]) LockPath(bdf string) string { return filepath.Join(s.Dir, bdf+".lock") }

// Read reads the record of the VF bdf. A missing record is the file's
// os.ErrNotExist error.
func (s Store[R]) Read(bdf string) (*R, error) {
	b, err := os.ReadFile(s.Path(bdf))
	if err != nil {
		return nil, err
	}
	var r R
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s cache %s is corrupt%s: %w", s.Plugin, s.Path(bdf), s.CorruptHint, err)
	}
	return &r, nil
}

// Find returns the record of containerID/ifName: directly when the config
// names the VF (deviceID), else by scanning the state dir, where records
// that do not read are skipped. No such record, or a VF recorded for
// another attachment, is an error wrapping os.ErrNotExist.
func (s Store[R]) Find(deviceID, containerID, ifName string) (*R, error) {
	match := func(r *R) bool {
		c, i := s.owner(r)
		return c == containerID && i == ifName
	}
	if deviceID != "" {
		r, err := s.Read(deviceID)
		if err != nil {
			return nil, err
		}
		if !match(r) {
			holder, _ := s.owner(r)
			if s.NameCaller {
				return nil, fmt.Errorf("VF %s is cached for container %s, not %s: %w", deviceID, holder, containerID, os.ErrNotExist)
			}
			return nil, fmt.Errorf("VF %s is cached for container %s: %w", deviceID, holder, os.ErrNotExist)
		}
		return r, nil
	}
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if r, err := s.Read(strings.TrimSuffix(e.Name(), ".json")); err == nil && match(r) {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no %s cache for container %s ifname %s: %w", s.Plugin, containerID, ifName, os.ErrNotExist)
}

// Write writes r as the record of the VF bdf; the caller holds the VF's
// lock, so every temporary file of the record goes with the write
// (fsutil.WriteFileAtomicLocked), also one an earlier write that a failing
// file system cut short left.
func (s Store[R]) Write(bdf string, r *R) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%s cache: %w", s.Plugin, err)
	}
	if err := fsutil.WriteFileAtomicLocked(s.Path(bdf), b, 0o600); err != nil {
		return fmt.Errorf("%s cache: %w", s.Plugin, err)
	}
	return nil
}

// Remove removes the record of the VF bdf and any temporary file of it;
// the caller holds the VF's lock. A record already gone is no error.
func (s Store[R]) Remove(bdf string) error {
	path := s.Path(bdf)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%s cache: %w", s.Plugin, err)
	}
	if err := fsutil.RemoveTemps(path); err != nil {
		return fmt.Errorf("%s cache: %w", s.Plugin, err)
	}
	return nil
}

// ClearCutShort removes, under the VF's lock, temporary files of its record
// that an ADD whose record write a failing file system cut short left (that
// ADD failed, so its DEL finds no record). Nothing to do (or no bdf) is the
// common case and takes no lock.
func (s Store[R]) ClearCutShort(bdf string) error {
	if bdf == "" || len(fsutil.TempFiles(s.Path(bdf))) == 0 {
		return nil
	}
	lk, err := netops.LockFile(s.LockPath(bdf))
	if err != nil {
		return err
	}
	defer lk.UnlockAndRemove()
	return fsutil.RemoveTemps(s.Path(bdf))
}
