package doctor

import (
	"fmt"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// ---- InfiniBand ----
//
// What an IB port needs beyond ACTIVE: a LID and an SM LID (the subnet
// manager configured it and is reachable), and membership in the partition
// the pod's network uses (the PKey in the port's table, with full
// membership for pods to talk to each other). No GID index is needed on IB.

// ibPorts checks LID, SM LID and the PKey table of every IB port
// (inventory.IBPort.Assess, shared with kubectl rdma verify).
func (c *checker) ibPorts() {
	for _, p := range portsOf(c.subjects()) {
		if p.port.LinkLayer != inventory.LinkInfiniBand {
			continue
		}
		v, msg, fix := p.port.IB.Assess(p.dev.Name)
		if v == inventory.IBUnread {
			fix = fmt.Sprintf("check <sysfs>/class/infiniband/%s/ports/%d/{lid,sm_lid,pkeys} and `ibstat %s`", p.dev.Name, p.port.Num, p.dev.Name)
		}
		c.add(IDIBPort, ibStatus(v), p.name()+": "+msg, fix)
		c.ibPKeys(p)
	}
}

// ibPKeys checks that every PKey the pod's networks use (Input.PKeys) is
// in the port's table with full membership (inventory.IBPort.AssessPKey).
func (c *checker) ibPKeys(p devicePort) {
	ib := p.port.IB
	if ib == nil || !ib.Read {
		return
	}
	for _, k := range c.in.PKeys {
		v, msg, fix := ib.AssessPKey(k)
		c.add(IDIBPKey, ibStatus(v), p.name()+": "+msg, fix)
	}
}

// ibStatus maps an IB verdict to a doctor status: a limited membership or
// an unreadable port warns.
func ibStatus(v inventory.IBVerdict) Status {
	switch v {
	case inventory.IBGood:
		return Pass
	case inventory.IBBad:
		return Fail
	}
	return Warn
}
