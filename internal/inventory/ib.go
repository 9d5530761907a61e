package inventory

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/sysfs"
)

// IBPort is the InfiniBand state of a port: what the subnet manager (SM)
// assigned and the port's identity. A port the SM has not configured has
// LID 0 (and usually SM LID 0); traffic needs both, and a partition (PKey)
// the port is a member of.
type IBPort struct {
	LID   uint16 `json:"lid"`
	SMLID uint16 `json:"sm_lid"`
	// PortGUID is the low half of GID 0 in ip-link form
	// (0c:42:a1:03:00:65:8e:81); "" when GID 0 is unreadable.
	PortGUID string `json:"port_guid,omitempty"`
	// PKeys are the non-empty entries of the port's PKey table, membership
	// bit (0x8000) included, as sysfs shows them.
	PKeys []uint16 `json:"pkeys,omitempty"`
	// Read is false when the port exposes none of lid, sm_lid and pkeys (a
	// sysfs that lacks them): the checks then say they cannot tell.
	Read bool `json:"read"`
}

// HasPKey reports whether the port is a member of partition pkey: an entry
// whose low 15 bits equal pkey's. full is set when that entry has the
// full-membership bit (limited members cannot talk to each other).
func (p *IBPort) HasPKey(pkey uint16) (member, full bool) {
	for _, k := range p.PKeys {
		if k&0x7fff == pkey&0x7fff {
			member = true
			full = full || k&0x8000 != 0
		}
	}
	return member, full
}

// FormatPKey writes a PKey as subnet managers and sysfs do: 0x8005.
func FormatPKey(k uint16) string { return fmt.Sprintf("0x%04x", k) }

// ParsePKey reads a PKey written in hex ("0x8005", "8005").
func ParsePKey(s string) (uint16, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	v, err := strconv.ParseUint(t, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("PKey %q: want 16-bit hex like 0x8005", s)
	}
	return uint16(v), nil
}

func readIBPort(fs sysfs.FS, ib string, port int) *IBPort {
	out := &IBPort{}
	base := filepath.Join(fs.RDMAPath(ib), "ports", strconv.Itoa(port))
	num := func(name string) (uint16, bool) {
		s, err := fs.ReadFile(filepath.Join(base, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(strings.TrimSpace(s), 0, 16)
		return uint16(v), err == nil
	}
	var ok bool
	if out.LID, ok = num("lid"); ok {
		out.Read = true
	}
	if out.SMLID, ok = num("sm_lid"); ok {
		out.Read = true
	}
	for _, i := range sysfs.ListInts(filepath.Join(base, "pkeys")) {
		out.Read = true
		if v, ok := num(filepath.Join("pkeys", strconv.Itoa(i))); ok && v&0x7fff != 0 {
			out.PKeys = append(out.PKeys, v)
		}
	}
	if g, err := fs.ReadFile(filepath.Join(base, "gids", "0")); err == nil {
		out.PortGUID = gidGUID(g)
	}
	return out
}

// gidGUID returns the interface ID (low 64 bits) of a GID in ip-link form.
func gidGUID(g string) string {
	h := strings.ReplaceAll(strings.TrimSpace(g), ":", "")
	if len(h) != 32 {
		return ""
	}
	var b []string
	for i := 16; i < 32; i += 2 {
		b = append(b, strings.ToLower(h[i:i+2]))
	}
	return strings.Join(b, ":")
}

// IBPortOf returns the InfiniBand state of the first IB port of f's RDMA
// devices, nil when it has none.
func (f *Function) IBPortOf() *IBPort {
	for _, d := range f.RDMA {
		for _, p := range d.Ports {
			if p.IB != nil {
				return p.IB
			}
		}
	}
	return nil
}

// LinkGUID converts a GUID in node_guid's form (0c42:a103:0065:8e81) to
// the form ip link and ib-sriov-cni use (0c:42:a1:03:00:65:8e:81); "" when
// it is not one.
func LinkGUID(s string) string {
	h := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	if len(h) != 16 {
		return ""
	}
	return gidGUID(strings.Repeat("0", 16) + h)
}

// ZeroGUID reports whether a GUID (either form) is all zeros: a VF whose
// GUID has not been set.
func ZeroGUID(s string) bool { return strings.Trim(strings.ReplaceAll(s, ":", ""), "0") == "" }
