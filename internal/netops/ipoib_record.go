package netops

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
)

// The recorder's IPoIB part. No kernel here has ib_ipoib, so record mode
// cannot create a real IPoIB child: the recorder records the exact request
// (IPoIBRequests, and the `ip link add ... type ipoib` line in the log) and
// stands in for the child with a macvlan of the parent stand-in (a veth or
// dummy named like the IB port's netdev), which the plugin then moves,
// renames, addresses and deletes with the ordinary link calls. The
// parents' IPoIB attributes (PKey, mode), which a stand-in lacks, are
// simulated (SetIPoIBParent; default: the default partition, datagram).
//
// Its state is a file of its own next to the recorder's (<state>.ipoib),
// under the recorder's lock, and its lines go to the recorder's log.

var _ IPoIB = (*Recorder)(nil)

// ipoibState is the IPoIB part of the simulated node.
type ipoibState struct {
	// Parents are the simulated attributes of parent stand-ins by name.
	Parents map[string]ipoibParentSim `json:"parents,omitempty"`
	// Requests are the children requested, in order.
	Requests []IPoIBChild `json:"requests,omitempty"`
}

type ipoibParentSim struct {
	PKey uint16 `json:"pkey"`
	Mode string `json:"mode"`
}

func (r *Recorder) ipoibPath() string { return r.path + ".ipoib" }

// updateIPoIB runs f on the IPoIB state under the recorder's lock and
// writes it back, appending the lines f returns to the recorder's log.
func (r *Recorder) updateIPoIB(f func(s *ipoibState) ([]string, error)) error {
	lk, err := LockFile(r.path + ".lock")
	if err != nil {
		return err
	}
	defer lk.Unlock()
	s, err := r.loadIPoIB()
	if err != nil {
		return err
	}
	lines, err := f(s)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("netops recorder: %w", err)
	}
	if err := writeFileAtomic(r.ipoibPath(), b, 0o600, false); err != nil {
		return fmt.Errorf("netops recorder: %w", err)
	}
	if len(lines) == 0 {
		return nil
	}
	return r.appendLog(lines)
}

func (r *Recorder) loadIPoIB() (*ipoibState, error) {
	s := &ipoibState{}
	b, err := os.ReadFile(r.ipoibPath())
	if errors.Is(err, os.ErrNotExist) {
		s.Parents = map[string]ipoibParentSim{}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netops recorder: %w", err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("netops recorder: state file %s is corrupt: %w", r.ipoibPath(), err)
	}
	if s.Parents == nil {
		s.Parents = map[string]ipoibParentSim{}
	}
	return s, nil
}

// SetIPoIBParent gives the parent stand-in name the IPoIB attributes a real
// IB port's netdev (or PKey child) would have. Setup of the simulated node,
// not an operation: nothing is logged.
func (r *Recorder) SetIPoIBParent(name string, pkey uint16, mode string) error {
	if _, ok := netlink.StringToIPoIBMode[mode]; !ok {
		return fmt.Errorf("simulated IPoIB parent %s: mode %q: want %s or %s", name, mode, IPoIBDatagram, IPoIBConnected)
	}
	return r.updateIPoIB(func(s *ipoibState) ([]string, error) {
		s.Parents[name] = ipoibParentSim{PKey: pkey, Mode: mode}
		return nil, nil
	})
}

// IPoIBRequests returns the child requests recorded so far, in order.
func (r *Recorder) IPoIBRequests() ([]IPoIBChild, error) {
	lk, err := LockFile(r.path + ".lock")
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	s, err := r.loadIPoIB()
	if err != nil {
		return nil, err
	}
	return s.Requests, nil
}

// IPoIBParent implements IPoIB for the stand-in: the netdev must exist in
// the calling thread's netns (any kind); PKey and mode are the simulated
// ones.
func (r *Recorder) IPoIBParent(name string) (IPoIBParent, error) {
	l, err := byName(name)
	if err != nil {
		return IPoIBParent{}, err
	}
	out := IPoIBParent{Name: name, Index: l.Attrs().Index, MTU: l.Attrs().MTU, PKey: DefaultPKey, Mode: IPoIBDatagram}
	err = r.updateIPoIB(func(s *ipoibState) ([]string, error) {
		if p, ok := s.Parents[name]; ok {
			out.PKey, out.Mode = p.PKey, p.Mode
		}
		return nil, nil
	})
	return out, err
}

// AddIPoIBChild implements IPoIB: it records the request (the netlink
// request the kernel path would send, in IPoIBRequests and as its `ip link`
// line in the log) and creates a bridge-mode macvlan of the parent
// stand-in with the child's name and MTU in its place.
func (r *Recorder) AddIPoIBChild(c IPoIBChild) error {
	if err := c.Validate(); err != nil {
		return err
	}
	p, err := byName(c.Parent)
	if err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex, attrs.MTU = c.Name, p.Attrs().Index, c.MTU
	if err := netlink.LinkAdd(&netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}); err != nil {
		return fmt.Errorf("%s (recorded; stand-in macvlan: %w)", c.Command(), err)
	}
	return r.updateIPoIB(func(s *ipoibState) ([]string, error) {
		s.Requests = append(s.Requests, c.normalized())
		return []string{c.Command()}, nil
	})
}

// DelIPoIBChild implements IPoIB for the stand-in (a macvlan).
func (r *Recorder) DelIPoIBChild(name string) error {
	l, err := byName(name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Type() != r.ChildKind() {
		return fmt.Errorf("netdev %q is a %q link, not the IPoIB child (stand-in %s) to delete: %w", name, l.Type(), r.ChildKind(), ErrNotIPoIB)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("ip link del %s: %w", name, err)
	}
	return r.updateIPoIB(func(*ipoibState) ([]string, error) { return []string{"ip link del " + name}, nil })
}

// ChildKind implements IPoIB: the stand-in's kind.
func (r *Recorder) ChildKind() string { return "macvlan" }
