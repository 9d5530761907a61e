package cluster

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The overlay's pools.json is checked against examples/cluster/pools.json by
// examples/cluster (TestOverlayPoolsAreThese).

func TestKubeletConfigForThisMachine(t *testing.T) {
	l := Layout{Dir: "/state", Repo: "/repo"}
	nodes, err := PlanNodes(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		cfg := kubeletConfig(l, n, true)
		for _, want := range []string{"failCgroupV1: false", "cgroupRoot: " + CgroupRoot + "/" + n.Name, "containerRuntimeEndpoint: unix://" + ContainerdSocket,
			"address: " + n.IP, "podCIDR: " + n.PodCIDR, "clusterDNS: [" + DNSServiceIP + "]"} {
			if !bytes.Contains([]byte(cfg), []byte(want)) {
				t.Errorf("%s: kubelet config lacks %q:\n%s", n.Name, want, cfg)
			}
		}
	}
	cd := containerdConfig(l)
	for _, want := range []string{"restrict_oom_score_adj = true", "sandbox = \"" + PauseImage + "\"", "version = 3"} {
		if !bytes.Contains([]byte(cd), []byte(want)) {
			t.Errorf("containerd config lacks %q:\n%s", want, cd)
		}
	}
}

// TestMultiNodeOverlay: a multi-node cluster installs overlay-multinode,
// whose pool config is the single-node overlay's pools verbatim (in order)
// plus only InfiniBand pools (linkTypes infiniband, the boards' IB PF), and
// which takes the GUID pool component; a single node keeps the overlay.
func TestMultiNodeOverlay(t *testing.T) {
	one, _ := PlanNodes(1, 0)
	three, _ := PlanNodes(3, 1)
	if got := overlayFor(one); got != OverlayDir {
		t.Errorf("one node installs %s, want %s", got, OverlayDir)
	}
	if got := overlayFor(three); got != MultiNodeOverlayDir {
		t.Errorf("three nodes install %s, want %s", got, MultiNodeOverlayDir)
	}
	read := func(p string) map[string][]any {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string][]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return v
	}
	base, multi := read("overlay/pools.json"), read("overlay-multinode/pools.json")
	for _, key := range []string{"resourceList", "configList"} {
		if len(multi[key]) < len(base[key]) || !reflect.DeepEqual(multi[key][:len(base[key])], base[key]) {
			t.Errorf("overlay-multinode/pools.json %s does not start with overlay/pools.json's %v", key, base[key])
			continue
		}
		extra := multi[key][len(base[key]):]
		if len(extra) == 0 {
			t.Errorf("overlay-multinode/pools.json %s adds no InfiniBand pool", key)
		}
		for _, p := range extra {
			if b, _ := json.Marshal(p); !strings.Contains(string(b), `"linkTypes":["infiniband"]`) || !strings.Contains(string(b), "ibp193s0f") {
				t.Errorf("overlay-multinode/pools.json %s: %s is not a pool of the boards' IB ports (linkTypes infiniband)", key, b)
			}
		}
	}
	k, err := os.ReadFile("overlay-multinode/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- ../overlay", "- ../../../deploy/components/infiniband"} {
		if !strings.Contains(string(k), want) {
			t.Errorf("overlay-multinode/kustomization.yaml lacks %q", want)
		}
	}
}

// TestIBLinks: every multi-node board's IB PF and VF stand-ins join the IB
// fabric's bridge at the IB MTU, with fabric ports of their own; the
// single-node cluster has none.
func TestIBLinks(t *testing.T) {
	one, _ := PlanNodes(1, 0)
	for _, l := range nodeLinks(one[0]) {
		if l.bridge == IBBridge {
			t.Errorf("single node: IB link %+v", l)
		}
	}
	nodes, _ := PlanNodes(4, 2)
	seen := map[string]bool{}
	for _, n := range nodes {
		var ib []string
		for _, l := range nodeLinks(n) {
			if seen[l.fab] || len(l.fab) > 15 {
				t.Errorf("%s: fabric port %q reused or longer than 15 bytes", n.Name, l.fab)
			}
			seen[l.fab] = true
			if l.bridge == IBBridge {
				ib = append(ib, l.dev)
				if l.mtu != IBMTU {
					t.Errorf("%s: %s at MTU %s, want %s", n.Name, l.dev, l.mtu, IBMTU)
				}
			}
		}
		if len(ib) != 2+IBVFs || ib[0] != IBPF || ib[1] != IBSharedPort || ib[1+IBVFs] != IBVFNetdev(IBVFs-1) {
			t.Errorf("%s: IB links %v, want %s, %s and the first's %d VFs", n.Name, ib, IBPF, IBSharedPort, IBVFs)
		}
		if p := IBFabricPort(n, IBVFNetdev(3)); p != FabricPort(n, "ib3") {
			t.Errorf("%s: fabric port of %s is %q", n.Name, IBVFNetdev(3), p)
		}
	}
}
