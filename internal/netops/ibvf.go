package netops

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
)

// IBVF sets the InfiniBand identity of a VF through its PF, like
// `ip link set <pf> vf <vf> node_guid|port_guid <guid>`, and rebinds a VF to
// its driver (what mlx5 needs before a new GUID takes effect).
type IBVF interface {
	SetVFNodeGUID(pf string, vf int, guid net.HardwareAddr) error
	SetVFPortGUID(pf string, vf int, guid net.HardwareAddr) error
	// RebindVF writes the VF's address to <sysfsRoot>/bus/pci/drivers/<driver>/unbind, then bind.
	RebindVF(sysfsRoot, bdf, driver string) error
}

var _ IBVF = Netlink{}

func checkGUID(guid net.HardwareAddr) error {
	if len(guid) != 8 {
		return fmt.Errorf("GUID %s: want 8 bytes", guid)
	}
	return nil
}

// SetVFNodeGUID sets IFLA_VF_IB_NODE_GUID of the VF.
func (Netlink) SetVFNodeGUID(pf string, vf int, guid net.HardwareAddr) error {
	if err := checkGUID(guid); err != nil {
		return err
	}
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfNodeGUID(l, vf, guid); err != nil {
		return fmt.Errorf("ip link set %s vf %d node_guid %s: %w", pf, vf, guid, err)
	}
	return nil
}

// SetVFPortGUID sets IFLA_VF_IB_PORT_GUID of the VF.
func (Netlink) SetVFPortGUID(pf string, vf int, guid net.HardwareAddr) error {
	if err := checkGUID(guid); err != nil {
		return err
	}
	l, err := byName(pf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetVfPortGUID(l, vf, guid); err != nil {
		return fmt.Errorf("ip link set %s vf %d port_guid %s: %w", pf, vf, guid, err)
	}
	return nil
}

// RebindVF unbinds the VF from driver and binds it again through sysfs.
func (Netlink) RebindVF(sysfsRoot, bdf, driver string) error {
	for _, op := range []string{"unbind", "bind"} {
		p := filepath.Join(sysfsRoot, "bus/pci/drivers", driver, op)
		if err := writeSysfs(p, bdf); err != nil {
			return fmt.Errorf("echo %s > %s: %w", bdf, p, err)
		}
	}
	return nil
}

// writeSysfs writes one attribute of an existing sysfs file (never creates one).
func writeSysfs(path, val string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(val)
	return errors.Join(werr, f.Close())
}
