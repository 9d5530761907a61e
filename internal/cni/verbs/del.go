package verbs

import (
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard"
	"github.com/rdmanet/rdmanet/internal/netops"
)

// DelStep is the part of a DEL that the device plugins (sriov, rdma,
// ib-sriov) share: with the device's lock held, re-read the record (a
// concurrent DEL may have finished: then there is nothing to do), open the
// host netns and the pod's (nil when it is already gone), and run Undo.
type DelStep struct {
	// Lock is the device's lock file.
	Lock string
	// Reread reports the record is still there; os.ErrNotExist means a
	// concurrent DEL finished it.
	Reread func() error
	// Netns is the pod's netns path (CNI_NETNS; may be empty on DEL).
	Netns string
	// StrictNetns fails the DEL when the pod netns exists but cannot be
	// opened (only a netns that is gone is passed as nil).
	StrictNetns bool
	Undo        func(hostNS, podNS ns.NetNS) error
}

// Run runs the step.
func (s DelStep) Run() error {
	lk, err := netops.LockFile(s.Lock)
	if err != nil {
		return err
	}
	defer lk.UnlockAndRemove()
	if err := s.Reread(); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	hostNS, err := nsguard.GetCurrentNS()
	if err != nil {
		return fmt.Errorf("open host netns: %w", err)
	}
	defer hostNS.Close()
	var podNS ns.NetNS
	if s.Netns != "" {
		n, err := nsguard.GetNS(s.Netns)
		switch {
		case err == nil:
			podNS = n
			defer n.Close()
		case s.StrictNetns && !NetnsGone(err):
			return fmt.Errorf("open pod netns %q: %w", s.Netns, err)
		}
	}
	return s.Undo(hostNS, podNS)
}

// NetnsGone reports whether opening a netns failed because it no longer exists.
func NetnsGone(err error) bool {
	var nsErr ns.NSPathNotExistErr
	var nsNot ns.NSPathNotNSErr
	return errors.As(err, &nsErr) || errors.As(err, &nsNot) || errors.Is(err, os.ErrNotExist)
}

// OpenPodNS opens the pod's netns (CNI_NETNS) for a CHECK or an ADD; its
// error names the path.
func OpenPodNS(netns string) (ns.NetNS, error) {
	n, err := nsguard.GetNS(netns)
	if err != nil {
		return nil, fmt.Errorf("open pod netns %q: %w", netns, err)
	}
	return n, nil
}
