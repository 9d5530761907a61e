package doctor

import (
	"fmt"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// ---- InfiniBand ----
//
// What an IB port needs beyond ACTIVE: a LID and an SM LID (the subnet
// manager configured it and is reachable), and membership in the partition
// the pod's network uses (the PKey in the port's table, with full
// membership for pods to talk to each other). No GID index is needed on IB.

// ibPorts checks LID, SM LID and the PKey table of every IB port.
func (c *checker) ibPorts() {
	for _, p := range portsOf(c.subjects()) {
		if p.port.LinkLayer != inventory.LinkInfiniBand {
			continue
		}
		ib := p.port.IB
		port := fmt.Sprintf("<sysfs>/class/infiniband/%s/ports/%d", p.dev.Name, p.port.Num)
		switch {
		case ib == nil || !ib.Read:
			c.add(IDIBPort, Warn, fmt.Sprintf("%s: LID, SM LID and PKey table unreadable", p.name()), "check "+port+"/{lid,sm_lid,pkeys} and `ibstat "+p.dev.Name+"`")
		case ib.LID == 0:
			c.add(IDIBPort, Fail, fmt.Sprintf("%s: LID 0: no subnet manager has configured the port (SM LID %#x); no IB traffic can be addressed to it", p.name(), ib.SMLID),
				"run a subnet manager on the fabric (opensm on a node, or the switch's SM) and check `sminfo` and `ibstat "+p.dev.Name+"` (Base lid, SM lid)")
		case ib.SMLID == 0:
			c.add(IDIBPort, Fail, fmt.Sprintf("%s: LID %#x but SM LID 0: the port does not know its subnet manager", p.name(), ib.LID),
				"check the subnet manager (`sminfo`); restart opensm or the switch's SM and wait for the sweep")
		case len(ib.PKeys) == 0:
			c.add(IDIBPort, Fail, fmt.Sprintf("%s: empty PKey table: the port is in no partition", p.name()),
				"add the port GUID "+orDash(ib.PortGUID)+" to a partition in the subnet manager's partitions.conf (or its fabric manager)")
		default:
			c.add(IDIBPort, Pass, fmt.Sprintf("%s: LID %#x, SM LID %#x, PKeys %s, port GUID %s", p.name(), ib.LID, ib.SMLID, pkeyList(ib.PKeys), orDash(ib.PortGUID)), "")
		}
		c.ibPKeys(p)
	}
}

// ibPKeys checks that every PKey the pod's networks use (Input.PKeys) is
// in the port's table with full membership.
func (c *checker) ibPKeys(p devicePort) {
	ib := p.port.IB
	if ib == nil || !ib.Read {
		return
	}
	for _, k := range c.in.PKeys {
		member, full := ib.HasPKey(k)
		fix := "the subnet manager must add the port GUID " + orDash(ib.PortGUID) + " to partition " + inventory.FormatPKey(k|0x8000) +
			" with full membership (partitions.conf: `name=...,pkey=" + inventory.FormatPKey(k&0x7fff) + ": " + orDash(ib.PortGUID) + "=full;`); rdmanet does not program the SM"
		switch {
		case !member:
			c.add(IDIBPKey, Fail, fmt.Sprintf("%s: PKey %s is not in the port's table (%s): IPoIB children and QPs in that partition get no traffic", p.name(), inventory.FormatPKey(k), pkeyList(ib.PKeys)), fix)
		case !full:
			c.add(IDIBPKey, Warn, fmt.Sprintf("%s: only a limited member of PKey %s: limited members cannot reach each other, only full members", p.name(), inventory.FormatPKey(k)), fix)
		default:
			c.add(IDIBPKey, Pass, fmt.Sprintf("%s: full member of PKey %s", p.name(), inventory.FormatPKey(k|0x8000)), "")
		}
	}
}

func pkeyList(ks []uint16) string {
	if len(ks) == 0 {
		return "none"
	}
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = inventory.FormatPKey(k)
	}
	return strings.Join(s, " ")
}
