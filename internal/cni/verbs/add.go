package verbs

import (
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/cni/vfrecord"
	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// AddHold is what the start of an ADD of the VF CNI plugins (sriov, rdma,
// ib-sriov) holds: the pod's netns, the host's, and the device's lock. Close
// releases them.
type AddHold struct {
	PodNS, HostNS ns.NetNS
	lock          *netops.FileLock
}

// OpenAdd opens the pod's netns (netns) and the host's, makes the state
// dir root-only (0700), and takes the device's lock (lock, a file in it).
// On error nothing is held.
func OpenAdd(netns, stateDir, lock string) (*AddHold, error) {
	h := &AddHold{}
	success := false
	defer func() {
		if !success {
			h.Close()
		}
	}()
	var err error
	if h.PodNS, err = nsguard.GetNS(netns); err != nil {
		return nil, fmt.Errorf("open pod netns %q: %w", netns, err)
	}
	if h.HostNS, err = nsguard.GetCurrentNS(); err != nil {
		return nil, fmt.Errorf("open host netns: %w", err)
	}
	if err := fsutil.PrivateDir(stateDir); err != nil {
		return nil, err
	}
	if h.lock, err = netops.LockFile(lock); err != nil {
		return nil, err
	}
	success = true
	return h, nil
}

// OpenAddRecord is the start of an ADD of a plugin that keeps a record per
// device (vfrecord): OpenAdd of the device deviceID (its lock beside its
// record), then the record an earlier attachment left on the device, if
// any, handed to reclaim with the host's netns (which finishes that
// attachment's teardown when its netns is gone, or refuses the device as
// in use). On error nothing is held.
func OpenAddRecord[R any](netns string, records vfrecord.Store[R], deviceID string, reclaim func(r *R, hostNS ns.NetNS) error) (*AddHold, error) {
	h, err := OpenAdd(netns, records.Dir, records.LockPath(deviceID))
	if err != nil {
		return nil, err
	}
	r, err := records.Read(deviceID)
	switch {
	case err == nil:
		err = reclaim(r, h.HostNS)
	case errors.Is(err, os.ErrNotExist):
		err = nil
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Close removes the lock file and releases the lock (lock files exist only
// while an ADD or DEL runs), then closes the namespaces.
func (h *AddHold) Close() {
	if h.lock != nil {
		_ = h.lock.UnlockAndRemove()
	}
	if h.HostNS != nil {
		_ = h.HostNS.Close()
	}
	if h.PodNS != nil {
		_ = h.PodNS.Close()
	}
}
