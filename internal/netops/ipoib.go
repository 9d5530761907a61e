package netops

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
)

// IPoIB modes as the kernel names them (IFLA_IPOIB_MODE, `ip -d link`).
const (
	IPoIBDatagram  = "datagram"
	IPoIBConnected = "connected"
)

// PKeyFullMember is the partition key's membership bit: the kernel sets it
// on every IPoIB child it creates (ipoib_netlink.c), so the request carries
// it as well and the recorded request equals what the kernel applies.
const PKeyFullMember uint16 = 0x8000

// DefaultPKey is the default partition's key with full membership, the
// PKey of an IB port's own IPoIB netdev (ib0) unless the SM says otherwise.
const DefaultPKey uint16 = 0xffff

// ErrNotIPoIB is wrapped when a netdev that must be an IPoIB interface
// (an IB port's netdev, or a child of one) is of another kind.
var ErrNotIPoIB = errors.New("not an IPoIB netdev")

// IPoIBParent is what a child is made from: the IB port's IPoIB netdev
// (ib0, ibp193s0f0) or a PKey child of it (ib0.8001).
type IPoIBParent struct {
	Name  string
	Index int
	PKey  uint16 // as the kernel reports it, membership bit included
	Mode  string // IPoIBDatagram or IPoIBConnected
	MTU   int
}

// IPoIBChild is the request for one IPoIB child interface (what
// `ip link add <Name> link <Parent> type ipoib pkey <PKey> mode <Mode>`
// asks): created in the calling thread's netns; the caller moves it.
type IPoIBChild struct {
	Name   string `json:"name"`
	Parent string `json:"parent"`
	// PKey is the child's partition key; AddIPoIBChild sets PKeyFullMember.
	PKey   uint16 `json:"pkey"`
	Mode   string `json:"mode"`
	Umcast bool   `json:"umcast"`
	// MTU of the child; 0 leaves it to the kernel (the parent's multicast MTU).
	MTU int `json:"mtu,omitempty"`
}

// normalized is c with the full-membership bit set and the default mode.
func (c IPoIBChild) normalized() IPoIBChild {
	c.PKey |= PKeyFullMember
	if c.Mode == "" {
		c.Mode = IPoIBDatagram
	}
	return c
}

// Validate refuses a request the kernel would refuse (ipoib_new_child_link:
// PKey 0 or 0x8000 is EINVAL) or that names an unknown mode.
func (c IPoIBChild) Validate() error {
	if c.PKey&^PKeyFullMember == 0 {
		return fmt.Errorf("IPoIB child %s of %s: PKey %#04x has no partition number (its low 15 bits are 0), which the kernel refuses", c.Name, c.Parent, c.PKey)
	}
	if _, ok := netlink.StringToIPoIBMode[c.normalized().Mode]; !ok {
		return fmt.Errorf("IPoIB child %s of %s: mode %q: want %s or %s", c.Name, c.Parent, c.Mode, IPoIBDatagram, IPoIBConnected)
	}
	if c.MTU < 0 {
		return fmt.Errorf("IPoIB child %s of %s: MTU %d is negative", c.Name, c.Parent, c.MTU)
	}
	return nil
}

// Request is the netlink link the kernel path adds for c below the parent
// with ifindex parentIndex: the exact RTM_NEWLINK request (tests compare it).
func (c IPoIBChild) Request(parentIndex int) *netlink.IPoIB {
	c = c.normalized()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = c.Name
	attrs.ParentIndex = parentIndex
	attrs.MTU = c.MTU
	l := &netlink.IPoIB{LinkAttrs: attrs, Pkey: c.PKey, Mode: netlink.StringToIPoIBMode[c.Mode]}
	if c.Umcast {
		l.Umcast = 1
	}
	return l
}

// Command is the request in `ip link` form (the recorder's log line).
func (c IPoIBChild) Command() string {
	c = c.normalized()
	var b strings.Builder
	fmt.Fprintf(&b, "ip link add %s link %s", c.Name, c.Parent)
	if c.MTU > 0 {
		fmt.Fprintf(&b, " mtu %d", c.MTU)
	}
	fmt.Fprintf(&b, " type ipoib pkey %#04x mode %s umcast %d", c.PKey, c.Mode, map[bool]int{false: 0, true: 1}[c.Umcast])
	return b.String()
}

// IPoIB creates and deletes IPoIB child interfaces. Netlink talks to the
// kernel (which needs the ib_ipoib module); Recorder records the request and
// stands in for the child with a macvlan (see Recorder.AddIPoIBChild).
type IPoIB interface {
	// IPoIBParent describes the netdev name of the calling thread's netns
	// as an IPoIB parent; ErrNotIPoIB when it is of another kind.
	IPoIBParent(name string) (IPoIBParent, error)
	// AddIPoIBChild creates the child in the calling thread's netns.
	AddIPoIBChild(c IPoIBChild) error
	// DelIPoIBChild deletes the child name of the calling thread's netns;
	// a missing one is not an error, one of another kind is (ErrNotIPoIB:
	// never delete an interface some other plugin made).
	DelIPoIBChild(name string) error
	// ChildKind is the link kind a child made by AddIPoIBChild has
	// ("ipoib"; the recorder's stand-in is a "macvlan").
	ChildKind() string
}

var _ IPoIB = Netlink{}

// IPoIBOf returns the IPoIB implementation that goes with ops: the
// recorder when ops records (RDMANET_NETOPS=record in a test build), the
// kernel otherwise.
func IPoIBOf(ops Ops) IPoIB {
	if r, ok := ops.VF.(*Recorder); ok {
		return r
	}
	return Netlink{}
}

// IPoIBParent implements IPoIB.
func (Netlink) IPoIBParent(name string) (IPoIBParent, error) {
	l, err := byName(name)
	if err != nil {
		return IPoIBParent{}, err
	}
	ib, ok := l.(*netlink.IPoIB)
	if !ok {
		return IPoIBParent{}, fmt.Errorf("netdev %q is a %q link: %w", name, l.Type(), ErrNotIPoIB)
	}
	a := ib.Attrs()
	return IPoIBParent{Name: a.Name, Index: a.Index, PKey: ib.Pkey, Mode: ib.Mode.String(), MTU: a.MTU}, nil
}

// AddIPoIBChild implements IPoIB: RTM_NEWLINK of kind ipoib with
// IFLA_LINK = the parent, IFLA_IPOIB_PKEY/MODE/UMCAST and IFLA_MTU.
func (Netlink) AddIPoIBChild(c IPoIBChild) error {
	if err := c.Validate(); err != nil {
		return err
	}
	p, err := byName(c.Parent)
	if err != nil {
		return err
	}
	if err := netlink.LinkAdd(c.Request(p.Attrs().Index)); err != nil {
		return fmt.Errorf("%s: %w (the kernel needs the ib_ipoib module and an IPoIB parent)", c.Command(), err)
	}
	return nil
}

// DelIPoIBChild implements IPoIB.
func (Netlink) DelIPoIBChild(name string) error {
	l, err := byName(name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Type() != "ipoib" {
		return fmt.Errorf("netdev %q is a %q link, not the IPoIB child to delete: %w", name, l.Type(), ErrNotIPoIB)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("ip link del %s: %w", name, err)
	}
	return nil
}

// ChildKind implements IPoIB.
func (Netlink) ChildKind() string { return "ipoib" }
