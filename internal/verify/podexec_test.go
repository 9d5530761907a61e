package verify

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func TestSplitJoinSections(t *testing.T) {
	tests := []struct {
		name string
		secs map[string]string
	}{
		{"exclusive", exclusiveExec()},
		{"shared", sharedExec()},
		{"host", hostExec()},
		{"empty sections", map[string]string{SecDevInf: "", SecMemlock: "unlimited\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitSections(JoinSections(tt.secs))
			if !reflect.DeepEqual(got, tt.secs) {
				t.Errorf("round trip:\n got %q\nwant %q", got, tt.secs)
			}
		})
	}
}

func TestParsePodView(t *testing.T) {
	tests := []struct {
		name      string
		secs      map[string]string
		links     []string
		up        map[string]bool
		addrs     map[string][]string
		defRoute  string
		devices   []string
		netdevs   map[string][]string
		roceV2v4  map[string]int // device → index of the first RoCEv2 IPv4 GID
		capIPC    bool
		memlock   string
		envSource string
		env       map[string]string
	}{
		{
			name: "exclusive", secs: exclusiveExec(),
			links: []string{"lo", "eth0", "net1"}, up: map[string]bool{"net1": true},
			addrs:    map[string][]string{"net1": {"192.168.100.12", "fe80::601b:8eff:fe5d:a31"}, "eth0": {"10.244.1.5"}},
			defRoute: "eth0", devices: []string{"mlx5_3"}, netdevs: map[string][]string{"mlx5_3": {"net1"}},
			roceV2v4: map[string]int{"mlx5_3": 3}, capIPC: true, memlock: "unlimited",
			envSource: "/proc/1/environ (the container's main process)", env: map[string]string{"NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "net1"},
		},
		{
			name: "shared", secs: sharedExec(),
			links: []string{"lo", "eth0", "net1"}, up: map[string]bool{"net1": true},
			addrs:    map[string][]string{"net1": {"192.168.100.21"}},
			defRoute: "eth0", devices: []string{"mlx5_0"}, netdevs: map[string][]string{"mlx5_0": nil},
			roceV2v4: map[string]int{"mlx5_0": 3}, capIPC: true, memlock: "unlimited",
			envSource: "/proc/1/environ (the container's main process)", env: map[string]string{"NCCL_IB_GID_INDEX": "5"},
		},
		{
			name: "down link, no caps, limited memlock, PID 1 is pause (env from exec)",
			secs: map[string]string{
				SecLink:    loLink + "5: net1: <BROADCAST,MULTICAST> mtu 1500 qdisc noop qlen 1000\\    link/ether 02:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff\n",
				SecAddr:    loAddr,
				SecRoute:   "192.168.100.0/24 dev net1 scope link  src 192.168.100.9 \n",
				SecStatus:  statusDefault,
				SecMemlock: "65536\n",
				SecEnv:     "NCCL_IB_HCA=mlx5\nNOT A VAR\n",
				SecEnv1:    "PATH=/usr/local/bin:/usr/bin\n", // shareProcessNamespace: PID 1 is pause
			},
			links: []string{"lo", "net1"}, up: map[string]bool{"net1": false, "lo": true},
			addrs: map[string][]string{"net1": nil}, memlock: "65536",
			envSource: "env (the container spec, through exec)", env: map[string]string{"NCCL_IB_HCA": "mlx5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ParsePodView(tt.secs)
			if got := v.LinkNames(); !reflect.DeepEqual(got, tt.links) {
				t.Errorf("links %q, want %q", got, tt.links)
			}
			for n, up := range tt.up {
				l, ok := v.Link(n)
				if !ok || l.Up() != up {
					t.Errorf("link %s up=%v (found %v), want %v", n, l.Up(), ok, up)
				}
			}
			for n, want := range tt.addrs {
				if got := v.AddrsOf(n); !reflect.DeepEqual(got, want) {
					t.Errorf("addresses of %s %q, want %q", n, got, want)
				}
			}
			def := ""
			for _, r := range v.Routes {
				if r.IsDefault() {
					def = r.Dev
				}
			}
			if def != tt.defRoute {
				t.Errorf("default route dev %q, want %q", def, tt.defRoute)
			}
			if got := v.DeviceNames(); !reflect.DeepEqual(got, tt.devices) {
				t.Errorf("devices %q, want %q", got, tt.devices)
			}
			for _, d := range v.Devices {
				if !reflect.DeepEqual(d.Netdevs, tt.netdevs[d.Name]) {
					t.Errorf("%s netdevs %q, want %q", d.Name, d.Netdevs, tt.netdevs[d.Name])
				}
				idx := -1
				for _, g := range d.Ports[0].GIDs {
					if g.RoCEv2IPv4() {
						idx = g.Index
						break
					}
				}
				if idx != tt.roceV2v4[d.Name] {
					t.Errorf("%s first RoCEv2 IPv4 GID at %d, want %d", d.Name, idx, tt.roceV2v4[d.Name])
				}
				if !d.Ports[0].RoCE() {
					t.Errorf("%s port 1 not RoCE", d.Name)
				}
			}
			if got := v.CapKnown && v.CapEff&(1<<capIPCLock) != 0; got != tt.capIPC || !v.CapKnown {
				t.Errorf("CAP_IPC_LOCK %v (known %v), want %v", got, v.CapKnown, tt.capIPC)
			}
			if v.Memlock != tt.memlock {
				t.Errorf("memlock %q, want %q", v.Memlock, tt.memlock)
			}
			if v.EnvSource != tt.envSource {
				t.Errorf("env source %q, want %q", v.EnvSource, tt.envSource)
			}
			for k, want := range tt.env {
				if v.Env[k] != want {
					t.Errorf("env %s=%q, want %q", k, v.Env[k], want)
				}
			}
		})
	}
}

func TestGIDIPv4(t *testing.T) {
	tests := []struct {
		name, gid, want string
	}{
		{"ipv4-mapped", "0000:0000:0000:0000:0000:ffff:c0a8:640c", "192.168.100.12"},
		{"link-local", "fe80:0000:0000:0000:601b:8eff:fe5d:0a31", ""},
		{"garbage", "not-a-gid", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gidIPv4(tt.gid); got != tt.want {
				t.Errorf("gidIPv4(%q) = %q, want %q", tt.gid, got, tt.want)
			}
		})
	}
}

func TestMemlockKiB(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		unlimited bool
		kib       uint64
		wantErr   bool
	}{
		{"unlimited", "unlimited", true, 0, false},
		{"64 KiB", "64", false, 64, false},
		{"garbage", "sh: ulimit: bad", false, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, k, err := memlockKiB(tt.in)
			if u != tt.unlimited || k != tt.kib || (err != nil) != tt.wantErr {
				t.Errorf("memlockKiB(%q) = %v, %d, %v", tt.in, u, k, err)
			}
		})
	}
}

// TestScriptWithBusybox runs the in-pod script under busybox sh with a PATH
// of busybox applets only (what a busybox image has), over a fake
// /sys/class/infiniband tree, and parses what it printed.
func TestScriptWithBusybox(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("busybox not found: %v", err)
		}
		t.Skip("busybox not installed: the in-pod script cannot be run here")
	}
	bin := t.TempDir()
	for _, applet := range []string{"sh", "ip", "ls", "cat", "grep", "tr", "env"} {
		if err := os.Symlink(bb, filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	ib := t.TempDir()
	port := filepath.Join(ib, "mlx5_3", "ports", "1")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(port, "link_layer"), "Ethernet\n")
	write(filepath.Join(port, "state"), "4: ACTIVE\n")
	gids := []struct{ gid, typ string }{
		{"fe80:0000:0000:0000:601b:8eff:fe5d:0a31", "IB/RoCE v1"},
		{"fe80:0000:0000:0000:601b:8eff:fe5d:0a31", "RoCE v2"},
		{"0000:0000:0000:0000:0000:ffff:c0a8:640c", "IB/RoCE v1"},
		{"0000:0000:0000:0000:0000:ffff:c0a8:640c", "RoCE v2"},
		{"0000:0000:0000:0000:0000:0000:0000:0000", ""},
	}
	for i, g := range gids {
		write(filepath.Join(port, "gids", strconv.Itoa(i)), g.gid+"\n")
		if g.typ != "" {
			write(filepath.Join(port, "gid_attrs", "types", strconv.Itoa(i)), g.typ+"\n")
			write(filepath.Join(port, "gid_attrs", "ndevs", strconv.Itoa(i)), "net1\n")
		}
	}
	if err := os.MkdirAll(filepath.Join(ib, "mlx5_3", "device", "net", "net1"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(Script, "/sys/class/infiniband", ib)
	cmd := exec.Command(filepath.Join(bin, "sh"), "-c", script)
	cmd.Env = []string{"PATH=" + bin, "NCCL_IB_GID_INDEX=3"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	secs := SplitSections(string(out))
	for _, s := range []string{SecLink, SecAddr, SecRoute, SecIB, SecDevInf, SecStatus, SecMemlock, SecEnv, SecEnv1} {
		if _, ok := secs[s]; !ok {
			t.Errorf("section %s missing from the output:\n%s", s, out)
		}
	}
	v := ParsePodView(secs)
	if _, ok := v.Link("lo"); !ok {
		t.Errorf("no lo link parsed from busybox `ip -o link`:\n%s", secs[SecLink])
	}
	if len(v.AddrsOf("lo")) == 0 {
		t.Errorf("no lo address parsed from busybox `ip -o addr`:\n%s", secs[SecAddr])
	}
	if !v.CapKnown {
		t.Errorf("no CapEff parsed:\n%s", secs[SecStatus])
	}
	if _, _, err := memlockKiB(v.Memlock); err != nil {
		t.Error(err)
	}
	if v.Env["NCCL_IB_GID_INDEX"] != "3" && !hasNCCL(parseEnv(secs[SecEnv1])) {
		t.Errorf("env: NCCL_IB_GID_INDEX=%q, want 3 (section %q)", v.Env["NCCL_IB_GID_INDEX"], secs[SecEnv])
	}
	want := []IBDevice{{Name: "mlx5_3", Netdevs: []string{"net1"}, Ports: []IBPort{{Num: 1, LinkLayer: "Ethernet", State: "4: ACTIVE", GIDs: []GID{
		{Index: 0, GID: gids[0].gid, Netdev: "net1", Type: "IB/RoCE v1"},
		{Index: 1, GID: gids[1].gid, Netdev: "net1", Type: "RoCE v2"},
		{Index: 2, GID: gids[2].gid, Netdev: "net1", Type: "IB/RoCE v1", IPv4: "192.168.100.12"},
		{Index: 3, GID: gids[3].gid, Netdev: "net1", Type: "RoCE v2", IPv4: "192.168.100.12"},
	}}}}}
	if !reflect.DeepEqual(v.Devices, want) {
		t.Errorf("devices from the script:\n got %+v\nwant %+v\nsection:\n%s", v.Devices, want, secs[SecIB])
	}
}

// TestScriptOnIBFixture runs the in-pod script under busybox over the IB
// test node's /sys/class/infiniband and compares what it reads of every
// InfiniBand port (LID, SM LID, PKey table, port GUID) with what the node
// inventory reads from the same sysfs: verify judges the pod's ports with
// the same data doctor judges the node's.
func TestScriptOnIBFixture(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not found: %v (the in-pod script cannot be run; install busybox)", err)
	}
	bin := t.TempDir()
	for _, applet := range []string{"sh", "ip", "ls", "cat", "grep", "tr", "env"} {
		if err := os.Symlink(bb, filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(t.TempDir(), "sys")
	n, err := sysfsfixture.NewIBNode(root, sysfsfixture.IBNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// a port the subnet manager lost, with a limited membership
	if err := n.SetIBPort(n.IBOnly.RDMADev, sysfsfixture.IBPort{LID: 0x13, PKeys: []uint16{0xffff, 0x0005}}); err != nil {
		t.Fatal(err)
	}
	node, err := inventory.Discover(inventory.Options{SysfsRoot: root, NetnsModeFlag: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]inventory.IBPort{}
	for _, f := range node.Functions {
		for _, d := range f.RDMA {
			for _, p := range d.Ports {
				if p.IB != nil {
					want[fmt.Sprintf("%s/%d", d.Name, p.Num)] = *p.IB
				}
			}
		}
	}
	script := strings.ReplaceAll(Script, "/sys/class/infiniband", filepath.Join(root, "class", "infiniband"))
	cmd := exec.Command(filepath.Join(bin, "sh"), "-c", script)
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	v := ParsePodView(SplitSections(string(out)))
	got := map[string]inventory.IBPort{}
	for _, d := range v.Devices {
		for _, p := range d.Ports {
			if p.IB != nil {
				got[fmt.Sprintf("%s/%d", d.Name, p.Num)] = *p.IB
			}
			if p.InfiniBand() != (p.IB != nil) {
				t.Errorf("%s port %d: link layer %q but IB lines %v", d.Name, p.Num, p.LinkLayer, p.IB != nil)
			}
		}
	}
	if len(want) < 3 {
		t.Fatalf("inventory found %d IB ports on the IB node, want at least 3: %v", len(want), want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("IB ports read by the in-pod script differ from the inventory's:\n got %+v\nwant %+v\nsection:\n%s", got, want, SplitSections(string(out))[SecIB])
	}
	for _, tc := range []struct {
		name, port string
		verdict    inventory.IBVerdict
		pkey       uint16
		pkeyV      inventory.IBVerdict
	}{
		{"shared port, partition 0x8006", n.Port1.RDMADev + "/1", inventory.IBGood, 0x8006, inventory.IBGood},
		{"exclusive PF, partition 0x8006 missing", n.Port0.RDMADev + "/1", inventory.IBGood, 0x8006, inventory.IBBad},
		{"IB-only PF, SM lost, limited member", n.IBOnly.RDMADev + "/1", inventory.IBBad, 0x8005, inventory.IBWeak},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := got[tc.port]
			if !ok {
				t.Fatalf("no IB port %s in the script's output", tc.port)
			}
			if v, msg, _ := p.Assess("dev"); v != tc.verdict {
				t.Errorf("Assess = %v (%s), want %v", v, msg, tc.verdict)
			}
			if v, msg, _ := p.AssessPKey(tc.pkey); v != tc.pkeyV {
				t.Errorf("AssessPKey(%#x) = %v (%s), want %v", tc.pkey, v, msg, tc.pkeyV)
			}
		})
	}
}
