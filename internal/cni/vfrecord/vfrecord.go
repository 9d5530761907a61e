// Package vfrecord is the record store the exclusive-mode CNI plugins
// (sriov, rdma) keep in their state dir: one JSON file per VF, named by its
// PCI address (<bdf>.json), holding what DEL needs to undo the ADD, and the
// VF's lock file beside it (<bdf>.lock). A record is written and removed
// only under the VF's lock.
package vfrecord

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/netops"
)

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
	// Owner returns the container ID and interface name a record is of.
	Owner func(*R) (containerID, ifName string)
}

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
		c, i := s.Owner(r)
		return c == containerID && i == ifName
	}
	if deviceID != "" {
		r, err := s.Read(deviceID)
		if err != nil {
			return nil, err
		}
		if !match(r) {
			holder, _ := s.Owner(r)
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
