package verify

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Sections of the in-pod script's output.
const (
	SecLink    = "link"    // ip -o link
	SecAddr    = "addr"    // ip -o addr
	SecRoute   = "route"   // ip -o route
	SecIB      = "ib"      // /sys/class/infiniband: dev/port/gid lines
	SecDevInf  = "devinf"  // ls /dev/infiniband
	SecStatus  = "status"  // grep Cap /proc/self/status
	SecMemlock = "memlock" // ulimit -l
	SecEnv     = "env"     // env (the exec'd shell: the container spec's env)
	SecEnv1    = "env1"    // /proc/1/environ (the training process, after its script's exports)
)

// marker starts a section of the script's output.
const marker = "@@rdma-verify "

// Script is what runs in the pod (`sh -c Script`): only busybox applets
// (ip, ls, cat, grep, tr, env) and sh builtins (ulimit). Every section is
// announced by a marker line; the script always exits 0, so a failure of
// the exec itself (no sh, exec refused) is told apart from what it reads.
const Script = `m() { echo "` + marker + `$1"; }
m link; ip -o link 2>&1
m addr; ip -o addr 2>&1
m route; ip -o route 2>&1
m ib
for d in /sys/class/infiniband/*; do
  [ -e "$d" ] || continue
  n=${d##*/}
  echo "dev $n" $(ls "$d/device/net" 2>/dev/null)
  for p in "$d"/ports/*; do
    [ -e "$p" ] || continue
    pn=${p##*/}
    ll=$(cat "$p/link_layer" 2>/dev/null)
    echo "port $n $pn $ll $(cat "$p/state" 2>/dev/null)"
    if [ "$ll" = InfiniBand ]; then
      l=$(cat "$p/lid" 2>/dev/null); s=$(cat "$p/sm_lid" 2>/dev/null)
      echo "ibport $n $pn ${l:--} ${s:--}"
      echo "pkeys $n $pn" $(cat "$p"/pkeys/* 2>/dev/null)
    fi
    for g in "$p"/gids/*; do
      i=${g##*/}
      v=$(cat "$g" 2>/dev/null)
      case "$v" in ""|0000:0000:0000:0000:0000:0000:0000:0000) continue;; esac
      t=$(cat "$p/gid_attrs/types/$i" 2>/dev/null)
      nd=$(cat "$p/gid_attrs/ndevs/$i" 2>/dev/null)
      echo "gid $n $pn $i $v ${nd:--} ${t:--}"
    done
  done
done
m devinf; ls /dev/infiniband 2>/dev/null
m status; grep Cap /proc/self/status 2>&1
m memlock; ulimit -l 2>&1
m env; env
m env1; tr '\0' '\n' </proc/1/environ 2>/dev/null
m end
true
`

// Command is the exec command line.
func Command() []string { return []string{"sh", "-c", Script} }

// SplitSections splits the script's output into its sections.
func SplitSections(out string) map[string]string {
	secs := map[string]string{}
	cur := ""
	var b strings.Builder
	flush := func() {
		if cur != "" && cur != "end" {
			secs[cur] = b.String()
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, marker) {
			flush()
			cur = strings.TrimSpace(strings.TrimPrefix(line, marker))
			continue
		}
		if cur != "" {
			b.WriteString(line)
		}
	}
	flush()
	return secs
}

// JoinSections is the inverse of SplitSections: what the script prints for
// these sections (tests and recorded fixtures use it).
func JoinSections(secs map[string]string) string {
	var b strings.Builder
	for _, k := range []string{SecLink, SecAddr, SecRoute, SecIB, SecDevInf, SecStatus, SecMemlock, SecEnv, SecEnv1} {
		v, ok := secs[k]
		if !ok {
			continue
		}
		b.WriteString(marker + k + "\n")
		b.WriteString(v)
		if v != "" && !strings.HasSuffix(v, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString(marker + "end\n")
	return b.String()
}

// Link is one line of `ip -o link`.
type Link struct {
	Name  string   `json:"name"`
	Flags []string `json:"flags"`
}

// Up tells whether the link is administratively up.
func (l Link) Up() bool { return l.has("UP") }

// Carrier tells whether the link has carrier (LOWER_UP).
func (l Link) Carrier() bool { return l.has("LOWER_UP") }

func (l Link) has(f string) bool {
	for _, x := range l.Flags {
		if x == f {
			return true
		}
	}
	return false
}

// Addr is one address of `ip -o addr`.
type Addr struct {
	Iface  string `json:"interface"`
	Family string `json:"family"` // inet, inet6
	CIDR   string `json:"cidr"`
}

// IP is the address without its prefix length.
func (a Addr) IP() string {
	ip, _, _ := strings.Cut(a.CIDR, "/")
	return ip
}

// Route is one line of `ip -o route`.
type Route struct {
	Dst string `json:"dst"`
	Via string `json:"via,omitempty"`
	Dev string `json:"dev"`
}

// IsDefault tells whether the route is a default route.
func (r Route) IsDefault() bool { return r.Dst == "default" || r.Dst == "0.0.0.0/0" }

// IBDevice is an RDMA device under /sys/class/infiniband.
type IBDevice struct {
	Name string `json:"name"`
	// Netdevs are the device's netdevs visible in the pod
	// (<dev>/device/net): the VF's net1 in exclusive mode.
	Netdevs []string `json:"netdevs"`
	Ports   []IBPort `json:"ports"`
}

// IBPort is one port of an RDMA device.
type IBPort struct {
	Num       int    `json:"port"`
	LinkLayer string `json:"link_layer"` // Ethernet (RoCE) or InfiniBand
	State     string `json:"state"`      // e.g. "4: ACTIVE"
	GIDs      []GID  `json:"gids"`
	// IB is what the subnet manager gave an InfiniBand port (LID, SM LID,
	// PKey table; the port GUID from GID 0), as the node inventory reads
	// it; nil on Ethernet ports.
	IB *inventory.IBPort `json:"ib,omitempty"`
}

// InfiniBand tells whether the port's link layer is InfiniBand.
func (p IBPort) InfiniBand() bool { return strings.EqualFold(p.LinkLayer, inventory.LinkInfiniBand) }

// Active tells whether the port state is ACTIVE ("4: ACTIVE").
func (p IBPort) Active() bool { return strings.HasSuffix(strings.TrimSpace(p.State), "ACTIVE") }

// RoCE tells whether the port is RoCE (Ethernet link layer).
func (p IBPort) RoCE() bool { return strings.EqualFold(p.LinkLayer, "Ethernet") }

// GID is one populated GID table entry.
type GID struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Netdev string `json:"netdev,omitempty"`
	Type   string `json:"type"` // "RoCE v2", "IB/RoCE v1"
	IPv4   string `json:"ipv4,omitempty"`
}

// RoCEv2IPv4 tells whether the entry is a RoCEv2 entry of an IPv4 address
// (the one NCCL_IB_GID_INDEX should name).
func (g GID) RoCEv2IPv4() bool { return g.IPv4 != "" && strings.EqualFold(g.Type, "RoCE v2") }

// PodView is what the pod showed from inside.
type PodView struct {
	Links   []Link     `json:"links"`
	Addrs   []Addr     `json:"addresses"`
	Routes  []Route    `json:"routes"`
	Devices []IBDevice `json:"rdma_devices"`
	// DevNodes are the entries of /dev/infiniband.
	DevNodes []string `json:"dev_infiniband"`
	// CapEff is the effective capability set (CapKnown false when the
	// status section had no CapEff line).
	CapEff   uint64 `json:"-"`
	CapKnown bool   `json:"-"`
	// Memlock is `ulimit -l` as printed: "unlimited" or KiB.
	Memlock string `json:"memlock"`
	// Env is the environment checked; EnvSource says whose.
	Env       map[string]string `json:"-"`
	EnvSource string            `json:"env_source"`
}

// Link returns the named link.
func (v *PodView) Link(name string) (Link, bool) {
	for _, l := range v.Links {
		if l.Name == name {
			return l, true
		}
	}
	return Link{}, false
}

// LinkNames lists the links' names.
func (v *PodView) LinkNames() []string {
	var out []string
	for _, l := range v.Links {
		out = append(out, l.Name)
	}
	return out
}

// AddrsOf lists the addresses (without prefix) of an interface.
func (v *PodView) AddrsOf(iface string) []string {
	var out []string
	for _, a := range v.Addrs {
		if a.Iface == iface {
			out = append(out, a.IP())
		}
	}
	return out
}

// DeviceNames lists the RDMA devices' names.
func (v *PodView) DeviceNames() []string {
	var out []string
	for _, d := range v.Devices {
		out = append(out, d.Name)
	}
	return out
}

// ParsePodView parses the sections of the script's output. It is lenient:
// a line it does not understand is skipped, not an error; a section that
// is missing leaves its part empty.
func ParsePodView(secs map[string]string) *PodView {
	v := &PodView{Env: map[string]string{}}
	v.Links, v.Addrs = parseIPLines(secs[SecLink] + secs[SecAddr])
	v.Routes = parseRoutes(secs[SecRoute])
	v.Devices = parseIB(secs[SecIB])
	for _, l := range lines(secs[SecDevInf]) {
		v.DevNodes = append(v.DevNodes, strings.Fields(l)...)
	}
	sort.Strings(v.DevNodes)
	for _, l := range lines(secs[SecStatus]) {
		if rest, ok := strings.CutPrefix(l, "CapEff:"); ok {
			if c, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64); err == nil {
				v.CapEff, v.CapKnown = c, true
			}
		}
	}
	if ls := lines(secs[SecMemlock]); len(ls) > 0 {
		v.Memlock = strings.TrimSpace(ls[0])
	}
	// PID 1 is the training process (after its script's exports) unless
	// the pod shares its process namespace (then it is the pause
	// process): its environment is used when it has NCCL settings.
	env1 := parseEnv(secs[SecEnv1])
	if hasNCCL(env1) {
		v.Env, v.EnvSource = env1, "/proc/1/environ (the container's main process)"
	} else {
		v.Env, v.EnvSource = parseEnv(secs[SecEnv]), "env (the container spec, through exec)"
	}
	return v
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimRight(l, "\r"))
		}
	}
	return out
}

// ifName strips "3:" style indexes, the trailing colon and "@ifN".
func ifName(tok string) string {
	tok = strings.TrimSuffix(tok, ":")
	if i := strings.IndexByte(tok, '@'); i >= 0 {
		tok = tok[:i]
	}
	return tok
}

// parseIPLines reads `ip -o link` and `ip -o addr` lines (busybox prints
// link lines in `ip -o addr` too):
//
//	3: net1@if12: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue \    link/ether ...
//	3: net1    inet 192.168.100.12/24 brd 192.168.100.255 scope global net1\       valid_lft forever ...
func parseIPLines(s string) ([]Link, []Addr) {
	var links []Link
	var addrs []Addr
	seenLink := map[string]bool{}
	seenAddr := map[Addr]bool{}
	for _, l := range lines(s) {
		f := strings.Fields(strings.ReplaceAll(l, `\`, " "))
		if len(f) < 3 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimSuffix(f[0], ":")); err != nil {
			continue
		}
		name := ifName(f[1])
		if strings.HasPrefix(f[2], "<") {
			if !seenLink[name] {
				seenLink[name] = true
				flags := strings.Split(strings.Trim(f[2], "<>"), ",")
				links = append(links, Link{Name: name, Flags: flags})
			}
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "inet" || f[i] == "inet6" {
				a := Addr{Iface: name, Family: f[i], CIDR: f[i+1]}
				if !seenAddr[a] {
					seenAddr[a] = true
					addrs = append(addrs, a)
				}
				break
			}
		}
	}
	return links, addrs
}

// parseRoutes reads `ip -o route`: "default via 10.244.1.1 dev eth0".
func parseRoutes(s string) []Route {
	var out []Route
	for _, l := range lines(s) {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		r := Route{Dst: f[0]}
		for i := 1; i+1 < len(f); i++ {
			switch f[i] {
			case "via":
				r.Via = f[i+1]
			case "dev":
				r.Dev = f[i+1]
			}
		}
		if r.Dev != "" {
			out = append(out, r)
		}
	}
	return out
}

// parseIB reads the script's infiniband lines:
//
//	dev mlx5_3 net1
//	port mlx5_3 1 Ethernet 4: ACTIVE
//	gid mlx5_3 1 3 0000:0000:0000:0000:0000:ffff:c0a8:640c net1 RoCE v2
//	ibport mlx5_4 1 0x14 0x1        (InfiniBand: LID, SM LID; "-" unreadable)
//	pkeys mlx5_4 1 0xffff 0x8005 0x0000 ...
func parseIB(s string) []IBDevice {
	var devs []IBDevice
	dev := func(name string) *IBDevice {
		for i := range devs {
			if devs[i].Name == name {
				return &devs[i]
			}
		}
		devs = append(devs, IBDevice{Name: name})
		return &devs[len(devs)-1]
	}
	port := func(d *IBDevice, num int) *IBPort {
		for i := range d.Ports {
			if d.Ports[i].Num == num {
				return &d.Ports[i]
			}
		}
		d.Ports = append(d.Ports, IBPort{Num: num})
		return &d.Ports[len(d.Ports)-1]
	}
	for _, l := range lines(s) {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "dev":
			d := dev(f[1])
			d.Netdevs = append(d.Netdevs, f[2:]...)
		case "port":
			if len(f) < 3 {
				continue
			}
			n, err := strconv.Atoi(f[2])
			if err != nil {
				continue
			}
			p := port(dev(f[1]), n)
			if len(f) > 3 {
				p.LinkLayer = f[3]
				p.State = strings.Join(f[4:], " ")
			}
		case "ibport", "pkeys":
			if len(f) < 3 {
				continue
			}
			n, err := strconv.Atoi(f[2])
			if err != nil {
				continue
			}
			p := port(dev(f[1]), n)
			if p.IB == nil {
				p.IB = &inventory.IBPort{}
			}
			parseIBPortLine(p.IB, f[0], f[3:])
		case "gid":
			if len(f) < 6 {
				continue
			}
			pn, err1 := strconv.Atoi(f[2])
			idx, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil {
				continue
			}
			g := GID{Index: idx, GID: f[4], Type: strings.Join(f[6:], " ")}
			if f[5] != "-" {
				g.Netdev = f[5]
			}
			if g.Type == "-" {
				g.Type = ""
			}
			g.IPv4 = gidIPv4(g.GID)
			p := port(dev(f[1]), pn)
			p.GIDs = append(p.GIDs, g)
		}
	}
	for i := range devs {
		sort.Slice(devs[i].Ports, func(a, b int) bool { return devs[i].Ports[a].Num < devs[i].Ports[b].Num })
		for j := range devs[i].Ports {
			p := &devs[i].Ports[j]
			gs := p.GIDs
			sort.Slice(gs, func(a, b int) bool { return gs[a].Index < gs[b].Index })
			if p.IB != nil && len(gs) > 0 && gs[0].Index == 0 {
				p.IB.PortGUID = inventory.GUIDOfGID(gs[0].GID)
			}
		}
	}
	return devs
}

// parseIBPortLine fills ib from an "ibport" (LID, SM LID) or "pkeys" (the
// PKey table's slots) line, as inventory reads the same sysfs files: empty
// slots (partition 0) are dropped, the membership bit is kept, and the
// port counts as read when any of the values is readable.
func parseIBPortLine(ib *inventory.IBPort, kind string, vals []string) {
	num := func(s string) (uint16, bool) {
		v, err := strconv.ParseUint(s, 0, 16)
		return uint16(v), err == nil
	}
	switch kind {
	case "ibport":
		if len(vals) > 0 {
			if v, ok := num(vals[0]); ok {
				ib.LID, ib.Read = v, true
			}
		}
		if len(vals) > 1 {
			if v, ok := num(vals[1]); ok {
				ib.SMLID, ib.Read = v, true
			}
		}
	case "pkeys":
		for _, x := range vals {
			v, ok := num(x)
			if !ok {
				continue
			}
			ib.Read = true
			if v&0x7fff != 0 {
				ib.PKeys = append(ib.PKeys, v)
			}
		}
	}
}

// gidIPv4 returns the IPv4 address of an IPv4-mapped GID
// (0000:0000:0000:0000:0000:ffff:c0a8:640c → 192.168.100.12), "" otherwise.
func gidIPv4(gid string) string {
	a, err := netip.ParseAddr(gid)
	if err != nil || !a.Is4In6() {
		return ""
	}
	return a.Unmap().String()
}

func hasNCCL(env map[string]string) bool {
	for k := range env {
		if strings.HasPrefix(k, "NCCL_") {
			return true
		}
	}
	return false
}

// parseEnv reads KEY=VALUE lines.
func parseEnv(s string) map[string]string {
	env := map[string]string{}
	for _, l := range lines(s) {
		k, v, ok := strings.Cut(l, "=")
		if ok && k != "" && !strings.ContainsAny(k, " \t") {
			env[k] = v
		}
	}
	return env
}

// memlockKiB parses `ulimit -l`: unlimited, or KiB.
func memlockKiB(s string) (unlimited bool, kib uint64, err error) {
	if s == "unlimited" {
		return true, 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return false, 0, fmt.Errorf("ulimit -l printed %q: want unlimited or a number of KiB", s)
	}
	return false, n, nil
}
