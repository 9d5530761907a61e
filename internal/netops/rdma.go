package netops

import (
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// RDMA netns modes (`rdma system set netns <mode>`).
const (
	RDMANetnsExclusive = "exclusive"
	RDMANetnsShared    = "shared"
)

// ErrRDMANotFound is wrapped when an RDMA device is not visible where asked.
var ErrRDMANotFound = errors.New("RDMA device not found")

// RDMA moves RDMA devices between network namespaces, like
// `rdma dev set <dev> netns <ns>`, and reads the subsystem's netns mode.
type RDMA interface {
	// NetnsMode returns "exclusive" or "shared" (`rdma system`).
	NetnsMode() (string, error)
	// InNetns reports whether dev is visible in target.
	InNetns(dev string, target ns.NetNS) (bool, error)
	// Move moves dev, visible in from, into to.
	Move(dev string, from, to ns.NetNS) error
}

var _ RDMA = Netlink{}

// NetnsMode asks the kernel's RDMA netlink for the netns mode.
func (Netlink) NetnsMode() (string, error) {
	m, err := netlink.RdmaSystemGetNetnsMode()
	if err != nil {
		return "", fmt.Errorf("rdma system: %w (is the ib_core module loaded?)", err)
	}
	return m, nil
}

func isRdmaNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not found")
}

// InNetns looks dev up from inside target.
func (Netlink) InNetns(dev string, target ns.NetNS) (bool, error) {
	found := false
	err := target.Do(func(ns.NetNS) error {
		_, err := netlink.RdmaLinkByName(dev)
		if isRdmaNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("rdma dev show %s: %w", dev, err)
		}
		found = true
		return nil
	})
	return found, err
}

// Move looks dev up inside from and moves it to to.
func (Netlink) Move(dev string, from, to ns.NetNS) error {
	return from.Do(func(ns.NetNS) error {
		l, err := netlink.RdmaLinkByName(dev)
		if isRdmaNotFound(err) {
			return fmt.Errorf("rdma dev %s in netns %s: %w", dev, from.Path(), ErrRDMANotFound)
		}
		if err != nil {
			return fmt.Errorf("rdma dev show %s: %w", dev, err)
		}
		if err := netlink.RdmaLinkSetNsFd(l, uint32(to.Fd())); err != nil {
			return fmt.Errorf("rdma dev set %s netns %s: %w", dev, to.Path(), err)
		}
		return nil
	})
}
