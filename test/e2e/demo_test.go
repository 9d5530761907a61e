package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sim"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// demoOptions gives each test its own work dir and namespace prefix, so it
// can run beside a `make demo` and beside other packages' tests.
func demoOptions(t *testing.T, pods, cycles int) sim.Options {
	t.Helper()
	netnsutil.RequireRoot(t)
	if err := sim.CheckBinaries(binDir); err != nil {
		t.Fatal(err)
	}
	// short: the demo's unix sockets live under the work dir (108-byte limit)
	dir, err := os.MkdirTemp("", "rdm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return sim.Options{Pods: pods, Cycles: cycles, WorkDir: filepath.Join(dir, "demo"), BinDir: binDir,
		NetnsPrefix: fmt.Sprintf("rdmae2e%d", os.Getpid()), Progress: logWriter{t}}
}

// leftoverNetns lists the network namespaces of prefix still mounted.
func leftoverNetns(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(sim.NetnsRunDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// ourLinks lists the links of the test process's own namespace that carry
// a name the demo gives its simulated netdevs: there must never be any.
func ourLinks(t *testing.T) []string {
	t.Helper()
	ls, err := netops.Links()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		if strings.HasPrefix(l.Name, "enp65s0f0") || l.Name == sim.SharedPF || strings.HasPrefix(l.Name, "wire") || l.Name == "net1" {
			out = append(out, l.Name)
		}
	}
	return out
}

func inCIDR(t *testing.T, addr, cidr string) bool {
	t.Helper()
	ip, _, err := net.ParseCIDR(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	return n.Contains(ip)
}

func iface(p sim.PodReport, name string) (sim.Interface, bool) {
	for _, i := range p.Interfaces {
		if i.Name == name {
			return i, true
		}
	}
	return sim.Interface{}, false
}

func ncclValue(p sim.PodReport, name string) string {
	for _, e := range p.NCCL {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestDemoAllModes is issue 3's end-to-end test: the demo engine on two
// simulated nodes, 8 pods per mode (exclusive, shared, host), attach and
// detach twice in a row, the simulated hosts compared before and after
// each round.
func TestDemoAllModes(t *testing.T) {
	const pods = 8
	o := demoOptions(t, pods, 2)
	before := ourLinks(t)
	rep, err := sim.Run(context.Background(), o)
	if rep != nil {
		var b bytes.Buffer
		_ = sim.WriteTable(&b, rep)
		t.Logf("demo output:\n%s", b.String())
	}
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if rep.Cleanup != "clean" {
		t.Fatalf("cleanup verdict: %s", rep.Cleanup)
	}
	if len(rep.Summary.Cycles) != 2 {
		t.Fatalf("rounds: %+v, want 2", rep.Summary.Cycles)
	}
	for i, c := range rep.Summary.Cycles {
		if c.Cleanup != "clean" {
			t.Errorf("round %d left the host changed: %s", i+1, c.Cleanup)
		}
	}
	if left := leftoverNetns(t, o.NetnsPrefix); len(left) > 0 {
		t.Errorf("network namespaces left after the demo: %v", left)
	}
	if _, err := os.Stat(o.WorkDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work dir %s left behind (%v)", o.WorkDir, err)
	}
	if after := ourLinks(t); len(after) != len(before) {
		t.Errorf("the test's own namespace gained simulated links: before %v, after %v", before, after)
	}

	byMode := map[string][]sim.PodReport{}
	for _, p := range rep.Pods {
		byMode[p.Mode] = append(byMode[p.Mode], p)
		if p.Error != "" {
			t.Errorf("pod %s/%s: %s", p.Namespace, p.Name, p.Error)
		}
	}
	seenIP := map[string]string{}
	seenDev := map[string]string{}
	unique := func(kind, v, pod string) {
		if prev, ok := seenIP[kind+v]; ok {
			t.Errorf("%s %s handed to both %s and %s", kind, v, prev, pod)
		}
		seenIP[kind+v] = pod
	}
	tests := []struct {
		name  string
		mode  string
		check func(t *testing.T, p sim.PodReport)
	}{
		{name: "exclusive: a VF as net1, its RDMA device moved in, seed IPAM range", mode: sim.ModeExclusive, check: func(t *testing.T, p sim.PodReport) {
			eth0, ok0 := iface(p, "eth0")
			net1, ok1 := iface(p, "net1")
			if !ok0 || !ok1 || len(p.Interfaces) != 2 {
				t.Fatalf("interfaces %+v, want eth0 and net1", p.Interfaces)
			}
			if len(eth0.IPs) != 1 || !inCIDR(t, eth0.IPs[0], "10.244.1.0/24") {
				t.Errorf("eth0 %v: want one address of the node's pod CIDR 10.244.1.0/24", eth0.IPs)
			}
			if len(net1.IPs) != 1 || !inCIDR(t, net1.IPs[0], "10.60.0.0/16") || inCIDR(t, net1.IPs[0], "10.60.0.0/24") {
				t.Errorf("net1 %v: want one address of 10.60.0.0/16 outside the excluded 10.60.0.0/24", net1.IPs)
			}
			vfs := p.Devices[sim.ExclusiveResource]
			if len(vfs) != 1 || net1.PCI != vfs[0] || !strings.HasPrefix(vfs[0], "0000:41:") {
				t.Errorf("net1 PCI %q, allocated %v: want the allocated VF of PF 0000:41:00.0", net1.PCI, vfs)
			}
			if len(vfs) == 1 {
				if prev, ok := seenDev[vfs[0]]; ok {
					t.Errorf("VF %s given to %s and %s", vfs[0], prev, p.Name)
				}
				seenDev[vfs[0]] = p.Name
			}
			if !strings.Contains(p.RDMA, "moved into the pod netns") {
				t.Errorf("RDMA placement %q", p.RDMA)
			}
			if p.DefaultRoute != "eth0" {
				t.Errorf("default route on %q, want eth0", p.DefaultRoute)
			}
			for _, r := range net1.Routes {
				if r == "default" {
					t.Errorf("net1 has a default route: %v", net1.Routes)
				}
			}
			if ncclValue(p, "NCCL_SOCKET_IFNAME") != "=net1" || ncclValue(p, "NCCL_IB_HCA") != "" {
				t.Errorf("NCCL env %+v", p.NCCL)
			}
			var st []struct {
				Name       string `json:"name"`
				Interface  string `json:"interface"`
				DeviceInfo *struct {
					Pci struct {
						PciAddress string `json:"pci-address"`
						RdmaDevice string `json:"rdma-device"`
					} `json:"pci"`
				} `json:"device-info"`
			}
			if err := json.Unmarshal(p.NetworkStatus, &st); err != nil || len(st) != 2 || st[1].Name != "ai-training/face-training-rdma" ||
				st[1].DeviceInfo == nil || st[1].DeviceInfo.Pci.PciAddress != net1.PCI || st[1].DeviceInfo.Pci.RdmaDevice == "" {
				t.Errorf("network-status %s (%v)", p.NetworkStatus, err)
			}
			unique("ip", net1.IPs[0], p.Name)
		}},
		{name: "shared: macvlan net1 on the shared PF, HCA slot, NCCL pinned to the HCA", mode: sim.ModeShared, check: func(t *testing.T, p sim.PodReport) {
			net1, ok := iface(p, "net1")
			if !ok || len(p.Interfaces) != 2 {
				t.Fatalf("interfaces %+v, want eth0 and net1", p.Interfaces)
			}
			if len(net1.IPs) != 1 || !inCIDR(t, net1.IPs[0], "192.168.2.0/24") || inCIDR(t, net1.IPs[0], "192.168.2.0/28") {
				t.Errorf("net1 %v: want one address of 192.168.2.0/24 outside 192.168.2.0/28", net1.IPs)
			}
			if net1.Kind != "macvlan on "+sim.SharedPF || net1.PCI != sim.SharedPFBDF {
				t.Errorf("net1 kind %q pci %q", net1.Kind, net1.PCI)
			}
			if len(p.Devices[sim.SharedResource]) != 1 || !strings.Contains(p.RDMA, "visible from the pod netns") {
				t.Errorf("devices %v, RDMA %q", p.Devices, p.RDMA)
			}
			if p.DefaultRoute != "eth0" {
				t.Errorf("default route on %q, want eth0", p.DefaultRoute)
			}
			if ncclValue(p, "NCCL_SOCKET_IFNAME") != "=net1" || ncclValue(p, "NCCL_IB_HCA") == "" {
				t.Errorf("NCCL env %+v", p.NCCL)
			}
			unique("ip", net1.IPs[0], p.Name)
		}},
		{name: "host: no CNI, the host's RoCE NIC, an HCA slot with its device nodes", mode: sim.ModeHost, check: func(t *testing.T, p sim.PodReport) {
			if p.AttachMS != 0 || len(p.NetworkStatus) != 0 || p.ContainerID != "" {
				t.Errorf("hostNetwork pod went through CNI: attach %dms, status %s", p.AttachMS, p.NetworkStatus)
			}
			if len(p.Interfaces) != 1 || p.Interfaces[0].Name != sim.SharedPF || p.Interfaces[0].PCI != sim.SharedPFBDF {
				t.Errorf("interfaces %+v", p.Interfaces)
			}
			if len(p.Devices[sim.SharedResource]) != 1 || len(p.DeviceNodes) == 0 {
				t.Errorf("devices %v, device nodes %v", p.Devices, p.DeviceNodes)
			}
			if ncclValue(p, "NCCL_SOCKET_IFNAME") != "="+sim.SharedPF {
				t.Errorf("NCCL env %+v", p.NCCL)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := byMode[tc.mode]
			if len(ps) != pods {
				t.Fatalf("%d %s pods, want %d", len(ps), tc.mode, pods)
			}
			for _, p := range ps {
				t.Run(p.Name, func(t *testing.T) { tc.check(t, p) })
			}
		})
	}
	slots := map[string]string{}
	for _, p := range append(byMode[sim.ModeShared], byMode[sim.ModeHost]...) {
		for _, id := range p.Devices[sim.SharedResource] {
			if prev, ok := slots[id]; ok {
				t.Errorf("shared slot %s given to %s and %s", id, prev, p.Name)
			}
			slots[id] = p.Name
		}
	}

	// -o json: exactly one object with the fields
	var b bytes.Buffer
	if err := sim.WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&b)
	var obj struct {
		Pods []struct {
			Name       string `json:"name"`
			Mode       string `json:"mode"`
			Interfaces []struct {
				Name string   `json:"name"`
				IPs  []string `json:"ips"`
				PCI  *string  `json:"pci"`
			} `json:"interfaces"`
			AttachMS *int64 `json:"attach_ms"`
		} `json:"pods"`
		Cleanup string          `json:"cleanup"`
		Summary json.RawMessage `json:"summary"`
	}
	if err := dec.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("-o json wrote more than one object")
	}
	if len(obj.Pods) != 3*pods || obj.Cleanup != "clean" || len(obj.Summary) < 2 {
		t.Fatalf("json: %d pods, cleanup %q, summary %s", len(obj.Pods), obj.Cleanup, obj.Summary)
	}
	for _, p := range obj.Pods {
		if p.Name == "" || p.Mode == "" || p.AttachMS == nil || len(p.Interfaces) == 0 || p.Interfaces[0].PCI == nil || p.Interfaces[0].IPs == nil {
			t.Fatalf("json pod %+v lacks a field", p)
		}
	}
}

// TestDemoKeepRefusesSecondRunAndCleansUp: --keep leaves the pods attached
// and the namespaces visible; a second demo on the same work dir refuses
// and names the first; --cleanup detaches, verifies and removes it all.
func TestDemoKeepRefusesSecondRunAndCleansUp(t *testing.T) {
	o := demoOptions(t, 2, 1)
	o.Keep = true
	rep, err := sim.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("demo --keep: %v", err)
	}
	t.Cleanup(func() { _, _ = sim.Cleanup(context.Background(), o.WorkDir, nil) })
	if !rep.Summary.Kept || len(rep.Summary.Commands) == 0 || !strings.HasPrefix(rep.Cleanup, "kept") {
		t.Fatalf("kept report: %+v", rep.Summary)
	}
	pod := o.NetnsPrefix + "-face-trainer-0"
	if left := leftoverNetns(t, o.NetnsPrefix); !contains(left, pod) {
		t.Fatalf("kept namespaces %v lack %s", left, pod)
	}
	_, err = sim.Run(context.Background(), o)
	var busy *sim.BusyError
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), "kept up") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) ||
		!strings.Contains(err.Error(), "--cleanup") {
		t.Fatalf("second run: %v, want a refusal naming the kept demo", err)
	}
	res, err := sim.Cleanup(context.Background(), o.WorkDir, logWriter{t})
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if !res.Found || res.Pods != 6 || res.Cleanup != "clean" {
		t.Fatalf("cleanup result %+v", res)
	}
	if left := leftoverNetns(t, o.NetnsPrefix); len(left) > 0 {
		t.Fatalf("namespaces left after --cleanup: %v", left)
	}
	if res, err := sim.Cleanup(context.Background(), o.WorkDir, nil); err != nil || res.Found {
		t.Fatalf("second cleanup: %+v %v, want nothing found", res, err)
	}
}
