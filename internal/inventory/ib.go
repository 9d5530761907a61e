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

// ParsePKey reads a PKey written in hex ("0x8005", "8005"), any 16 bits.
// Where a PKey names a partition a pod joins, CheckPKeyPartition refuses
// the invalid one.
func ParsePKey(s string) (uint16, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	v, err := strconv.ParseUint(t, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("PKey %q: want 16-bit hex like 0x8005", s)
	}
	return uint16(v), nil
}

// CheckPKeyPartition refuses a PKey whose partition number (its low 15
// bits) is 0: 0x0000 and 0x8000 are the invalid PKey of the IB spec.
func CheckPKeyPartition(k uint16) error {
	if k&0x7fff == 0 {
		return fmt.Errorf("0x%04x has partition number 0 (its low 15 bits), which is invalid; the default partition is 0x7fff", k)
	}
	return nil
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

// GUIDOfGID returns the interface ID (low 64 bits) of a GID in ip-link
// form: an IB port's GUID from its GID 0; "" when g is not a GID.
func GUIDOfGID(g string) string { return gidGUID(g) }

// FormatPKeys writes a PKey table as FormatPKey does, space-separated;
// "none" for an empty one.
func FormatPKeys(ks []uint16) string {
	if len(ks) == 0 {
		return "none"
	}
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = FormatPKey(k)
	}
	return strings.Join(s, " ")
}

// IBVerdict is the outcome of judging an IB port (Assess, AssessPKey).
type IBVerdict int

const (
	// IBGood: nothing in the way.
	IBGood IBVerdict = iota
	// IBUnread: the port's LID, SM LID and PKeys could not be read.
	IBUnread
	// IBWeak: works partly (a limited member of the partition).
	IBWeak
	// IBBad: no traffic can flow.
	IBBad
)

// Assess judges what a subnet manager must have given the port: a LID, an
// SM LID and a PKey table. dev names the RDMA device (for the commands of
// the fix). msg says what was found; fix is empty when the verdict is
// IBGood. doctor's ib-port and verify's ib-port checks both use it.
func (p *IBPort) Assess(dev string) (v IBVerdict, msg, fix string) {
	switch {
	case p == nil || !p.Read:
		return IBUnread, "LID, SM LID and PKey table unreadable", "check the port's lid, sm_lid and pkeys in sysfs and `ibstat " + dev + "`"
	case p.LID == 0:
		return IBBad, fmt.Sprintf("LID 0: no subnet manager has configured the port (SM LID %#x); no IB traffic can be addressed to it", p.SMLID),
			"run a subnet manager on the fabric (opensm on a node, or the switch's SM) and check `sminfo` and `ibstat " + dev + "` (Base lid, SM lid)"
	case p.SMLID == 0:
		return IBBad, fmt.Sprintf("LID %#x but SM LID 0: the port does not know its subnet manager", p.LID),
			"check the subnet manager (`sminfo`); restart opensm or the switch's SM and wait for the sweep"
	case len(p.PKeys) == 0:
		return IBBad, "empty PKey table: the port is in no partition",
			"add the port GUID " + dashIfEmpty(p.PortGUID) + " to a partition in the subnet manager's partitions.conf (or its fabric manager)"
	}
	return IBGood, fmt.Sprintf("LID %#x, SM LID %#x, PKeys %s, port GUID %s", p.LID, p.SMLID, FormatPKeys(p.PKeys), dashIfEmpty(p.PortGUID)), ""
}

// AssessPKey judges the port's membership of partition k: IBGood for a
// full member, IBWeak for a limited one (limited members cannot reach each
// other), IBBad when k is not in the table. The fix names the partitions.conf
// line the subnet manager needs; rdmanet does not program the SM.
func (p *IBPort) AssessPKey(k uint16) (v IBVerdict, msg, fix string) {
	if p == nil || !p.Read {
		return IBUnread, "PKey table unreadable", "check the port's pkeys in sysfs (`ibstat`, `smpquery pkeys`)"
	}
	member, full := p.HasPKey(k)
	fix = "the subnet manager must add the port GUID " + dashIfEmpty(p.PortGUID) + " to partition " + FormatPKey(k|0x8000) +
		" with full membership (partitions.conf: `name=...,pkey=" + FormatPKey(k&0x7fff) + ": " + dashIfEmpty(p.PortGUID) + "=full;`); rdmanet does not program the SM"
	switch {
	case !member:
		return IBBad, fmt.Sprintf("PKey %s is not in the port's table (%s): IPoIB children and QPs in that partition get no traffic", FormatPKey(k), FormatPKeys(p.PKeys)), fix
	case !full:
		return IBWeak, fmt.Sprintf("only a limited member of PKey %s: limited members cannot reach each other, only full members", FormatPKey(k)), fix
	}
	return IBGood, fmt.Sprintf("full member of PKey %s", FormatPKey(k|0x8000)), ""
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
