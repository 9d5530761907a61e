package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/guidpool"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sim"
)

// TestDemoInfiniBand is issue 28 item 5's demo test (`make demo-ib`): the
// InfiniBand variants of the seeds' exclusive and shared networks, as
// ib-sriov-cni and ipoib-cni users write them, on the demo's two IB nodes,
// 3 pods per mode, attach and detach twice. Every exclusive pod gets its
// own GUID from the node's GUID pool (set on its VF through the PF, shown
// as net1's mac in network-status) and the NAD's PKey; every IPoIB pod a
// child of the shared IB port; DEL resets the VFs' GUIDs and gives every
// GUID back to the pool (the second round allocates again), and the
// simulated hosts are exactly as before.
func TestDemoInfiniBand(t *testing.T) {
	const pods = 3
	o := demoOptions(t, pods, 2)
	o.Modes = sim.IBModes
	before := ibLinks(t)
	rep, err := sim.Run(context.Background(), o)
	var table bytes.Buffer
	if rep != nil {
		_ = sim.WriteTable(&table, rep)
		t.Logf("demo output:\n%s", table.String())
	}
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if rep.Cleanup != "clean" || len(rep.Summary.Cycles) != 2 {
		t.Fatalf("cleanup %q after %d rounds, want clean after 2", rep.Cleanup, len(rep.Summary.Cycles))
	}
	if left := leftoverNetns(t, o.NetnsPrefix); len(left) > 0 {
		t.Errorf("network namespaces left after the demo: %v", left)
	}
	if _, err := os.Stat(o.WorkDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work dir %s left behind (%v)", o.WorkDir, err)
	}
	if after := ibLinks(t); len(after) != len(before) {
		t.Errorf("the test's own namespace gained simulated IB links: before %v, after %v", before, after)
	}
	first, err := guidpool.ParseGUID(sim.GUIDPoolStart)
	if err != nil {
		t.Fatal(err)
	}
	last, err := guidpool.ParseGUID(sim.GUIDPoolEnd)
	if err != nil {
		t.Fatal(err)
	}
	byMode := map[string][]sim.PodReport{}
	for _, p := range rep.Pods {
		byMode[p.Mode] = append(byMode[p.Mode], p)
		if p.Error != "" || len(p.Notes) > 0 {
			t.Errorf("pod %s/%s: error %q, notes %v", p.Namespace, p.Name, p.Error, p.Notes)
		}
	}
	guids := map[string]string{}
	ips := map[string]string{}
	for _, p := range byMode[sim.ModeIBExclusive] {
		t.Run(p.Name, func(t *testing.T) {
			ib := p.InfiniBand
			if ib == nil || ib.Plugin != "ib-sriov" {
				t.Fatalf("InfiniBand report %+v", ib)
			}
			g, err := guidpool.ParseGUID(ib.GUID)
			if err != nil || g < first || g > last {
				t.Errorf("GUID %q: want one of the pool's range %s-%s (%v)", ib.GUID, sim.GUIDPoolStart, sim.GUIDPoolEnd, err)
			}
			if prev, ok := guids[ib.GUID]; ok {
				t.Errorf("GUID %s given to %s and %s", ib.GUID, prev, p.Name)
			}
			guids[ib.GUID] = p.Name
			if !strings.HasPrefix(ib.GUIDSource, "GUID pool") || ib.PKey != "0x8005" {
				t.Errorf("GUID source %q, PKey %q: want the node's GUID pool and the NAD's 0x8005", ib.GUIDSource, ib.PKey)
			}
			vfs := p.Devices[sim.IBExclusiveResource]
			net1, ok := iface(p, "net1")
			if len(vfs) != 1 || ib.VF != vfs[0] || !ok || net1.PCI != vfs[0] || !strings.HasPrefix(vfs[0], "0000:c1:00.") {
				t.Errorf("VF %q, allocated %v, net1 %+v: want the allocated VF of %s", ib.VF, vfs, net1, sim.IBExclusivePort)
			}
			if len(net1.IPs) != 1 || !inCIDR(t, net1.IPs[0], "10.61.0.0/16") || inCIDR(t, net1.IPs[0], "10.61.0.0/24") {
				t.Errorf("net1 %v: want one address of the NAD's 10.61.0.0/16 outside 10.61.0.0/24", net1.IPs)
			} else {
				ips[net1.IPs[0]] = p.Name
			}
			var st []struct {
				Interface  string `json:"interface"`
				MAC        string `json:"mac"`
				Name       string `json:"name"`
				InfiniBand *struct {
					GUID, PKey, Plugin string
				} `json:"infiniband"`
			}
			if err := json.Unmarshal(p.NetworkStatus, &st); err != nil || len(st) != 2 || st[1].Interface != "net1" || st[1].MAC != ib.GUID ||
				st[1].Name != "ai-training/ib-training-rdma" {
				t.Errorf("network-status %s: want net1 of ai-training/ib-training-rdma with the GUID %s as mac (%v)", p.NetworkStatus, ib.GUID, err)
			} else if x := st[1].InfiniBand; x == nil || x.GUID != ib.GUID || x.PKey != "0x8005" || x.Plugin != "ib-sriov" {
				t.Errorf("network-status %s: net1's infiniband %+v, want GUID %s, PKey 0x8005 (the NAD's), plugin ib-sriov", p.NetworkStatus, x, ib.GUID)
			}
			if !strings.Contains(p.RDMA, "moved into the pod netns") {
				t.Errorf("RDMA placement %q", p.RDMA)
			}
			rec := strings.Join(ib.Recorded, "\n")
			for _, w := range []string{"node_guid " + ib.GUID, "port_guid " + ib.GUID, "state enable", "/sys/bus/pci/drivers/mlx5_core/unbind", "rdma dev set "} {
				if !strings.Contains(rec, w) {
					t.Errorf("recorded operations lack %q:\n%s", w, rec)
				}
			}
			if ib.PoolReleased == nil || !*ib.PoolReleased || ib.GUIDAfterDel != guidpool.AllOnes.String() {
				t.Errorf("after DEL: pool released %v, VF GUID %q; want free in the pool and the VF at all ones", ib.PoolReleased, ib.GUIDAfterDel)
			}
			if ncclValue(p, "NCCL_SOCKET_IFNAME") != "=net1" || ncclValue(p, "NCCL_IB_HCA") != "" || ncclValue(p, "NCCL_IB_GID_INDEX") != "" {
				t.Errorf("NCCL env %+v", p.NCCL)
			}
		})
	}
	if len(byMode[sim.ModeIBExclusive]) != pods || len(guids) != pods {
		t.Errorf("%d ib-sriov pods with %d distinct GUIDs, want %d and %d", len(byMode[sim.ModeIBExclusive]), len(guids), pods, pods)
	}
	for _, p := range byMode[sim.ModeIBShared] {
		t.Run(p.Name, func(t *testing.T) {
			ib := p.InfiniBand
			if ib == nil || ib.Plugin != "ipoib" || ib.Parent != sim.IBSharedPort || ib.PKey != "0xffff" || ib.Mode != netops.IPoIBDatagram {
				t.Fatalf("InfiniBand report %+v: want an ipoib child of %s in the port's partition 0xffff, datagram", ib, sim.IBSharedPort)
			}
			if _, err := net.ParseMAC(ib.PortGUID); err != nil || len(ib.Recorded) != 1 || !strings.Contains(ib.Recorded[0], "link "+sim.IBSharedPort+" type ipoib pkey 0xffff") {
				t.Errorf("port GUID %q, recorded %v", ib.PortGUID, ib.Recorded)
			}
			net1, ok := iface(p, "net1")
			if !ok || net1.PCI != sim.IBSharedPortBDF || !strings.HasPrefix(net1.Kind, "IPoIB child of "+sim.IBSharedPort) {
				t.Errorf("net1 %+v", net1)
			}
			if len(net1.IPs) != 1 || !inCIDR(t, net1.IPs[0], "10.62.0.0/16") || inCIDR(t, net1.IPs[0], "10.62.0.0/24") {
				t.Errorf("net1 %v: want one address of the NAD's 10.62.0.0/16 outside 10.62.0.0/24", net1.IPs)
			} else {
				ips[net1.IPs[0]] = p.Name
			}
			if len(p.Devices[sim.IBSharedResource]) != 1 || !strings.Contains(p.RDMA, "visible from the pod netns") {
				t.Errorf("devices %v, RDMA %q", p.Devices, p.RDMA)
			}
			if ncclValue(p, "NCCL_IB_HCA") != "=mlx5_2" {
				t.Errorf("NCCL env %+v: want the shared port's HCA mlx5_2 pinned", p.NCCL)
			}
		})
	}
	if len(byMode[sim.ModeIBShared]) != pods || len(ips) != 2*pods {
		t.Errorf("%d IPoIB pods, %d distinct net1 addresses over all IB pods; want %d and %d", len(byMode[sim.ModeIBShared]), len(ips), pods, 2*pods)
	}
	for _, w := range []string{"InfiniBand (the ib-sriov-cni and ipoib-cni NADs unchanged", "3 ib-sriov pods, 3 distinct (unique)",
		"every GUID is free in the pool again", "IPoIB child of " + sim.IBSharedPort, "Verdict: CLEAN"} {
		if !strings.Contains(table.String(), w) {
			t.Errorf("demo output lacks %q", w)
		}
	}
}

// ibLinks lists the links of the test process's own namespace named like
// the IB nodes' netdevs: there must never be any.
func ibLinks(t *testing.T) []string {
	t.Helper()
	ls, err := netops.Links()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		if strings.HasPrefix(l.Name, "ibp193s0f") || strings.HasPrefix(l.Name, "ipoib") {
			out = append(out, l.Name)
		}
	}
	return out
}
