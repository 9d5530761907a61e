package sysfsfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Kinds of upper (stacked) netdevs AddUpper writes.
const (
	KindBond    = "bond"
	KindVLAN    = "vlan"
	KindBridge  = "bridge"
	KindMacvlan = "macvlan"
)

// Upper describes a virtual netdev stacked on other netdevs: a bond over
// PFs, a VLAN over a PF (or over a bond), a bridge with PF ports.
type Upper struct {
	Name   string   // bond0, enp65s0f0np0.200, br0
	Kind   string   // KindBond, KindVLAN, KindBridge, KindMacvlan
	Lowers []string // netdevs under it (already in the tree)
	// NoAdjacency leaves out the lower_<dev>/upper_<dev> links, keeping only
	// the kind's own lists (bonding/slaves, brif/), as older kernels have.
	NoAdjacency bool
}

// AddUpper writes devices/virtual/net/<name> with class/net/<name> pointing
// at it and, as the kernel does for every upper/lower pair, lower_<dev> in
// the upper's directory and upper_<name> in each lower's; a bond also gets
// bonding/slaves and its slaves a master link, a bridge brif/<port> and
// its ports a master link and brport/.
func (n *Node) AddUpper(u Upper) error {
	switch u.Kind {
	case KindBond, KindVLAN, KindBridge, KindMacvlan:
	default:
		return fmt.Errorf("sysfs fixture: upper %s: kind %q: want bond, vlan, bridge or macvlan", u.Name, u.Kind)
	}
	if (u.Kind == KindVLAN || u.Kind == KindMacvlan) && len(u.Lowers) != 1 {
		return fmt.Errorf("sysfs fixture: %s %s needs exactly one lower netdev, got %v", u.Kind, u.Name, u.Lowers)
	}
	dir := filepath.Join(n.Root, "devices/virtual/net", u.Name)
	n.macSeq++
	mac := fmt.Sprintf("02:16:%02x:%02x:%02x:%02x", byte(n.macSeq>>24), byte(n.macSeq>>16), byte(n.macSeq>>8), byte(n.macSeq))
	for name, val := range map[string]string{
		"address": mac, "type": "1", "mtu": "1500", "operstate": "up", "carrier": "1",
		"ifindex": strconv.Itoa(int(n.macSeq) + 100), "flags": flags(true),
		"uevent": "DEVTYPE=" + u.Kind + "\nINTERFACE=" + u.Name,
	} {
		if err := writeFile(dir, name, val); err != nil {
			return err
		}
	}
	if err := symlink(filepath.Join(n.Root, "class/net", u.Name), filepath.Join("../../devices/virtual/net", u.Name)); err != nil {
		return err
	}
	for _, l := range u.Lowers {
		ldir, err := filepath.EvalSymlinks(filepath.Join(n.Root, "class/net", l))
		if err != nil {
			return fmt.Errorf("sysfs fixture: lower netdev %s of %s: %w", l, u.Name, err)
		}
		udir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return fmt.Errorf("sysfs fixture: %w", err)
		}
		toLower, _ := filepath.Rel(udir, ldir)
		toUpper, _ := filepath.Rel(ldir, udir)
		if !u.NoAdjacency {
			if err := symlink(filepath.Join(udir, "lower_"+l), toLower); err != nil {
				return err
			}
			if err := symlink(filepath.Join(ldir, "upper_"+u.Name), toUpper); err != nil {
				return err
			}
		}
		switch u.Kind {
		case KindBond, KindBridge:
			if err := symlink(filepath.Join(ldir, "master"), toUpper); err != nil {
				return err
			}
		}
		if u.Kind == KindBridge {
			if err := writeFile(filepath.Join(ldir, "brport"), "port_no", "0x1"); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(udir, "brif"), 0o755); err != nil {
				return fmt.Errorf("sysfs fixture: %w", err)
			}
			if err := symlink(filepath.Join(udir, "brif", l), filepath.Join("..", toLower, "brport")); err != nil {
				return err
			}
		}
	}
	if u.Kind == KindBond {
		if err := writeFile(filepath.Join(dir, "bonding"), "slaves", strings.Join(u.Lowers, " ")); err != nil {
			return err
		}
	}
	return nil
}
