package verbs

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/fsutil"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// AddHold is what the start of an ADD of the VF CNI plugins (sriov, rdma)
// holds: the pod's netns, the host's, and the device's lock. Close
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
