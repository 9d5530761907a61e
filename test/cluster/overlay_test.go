package cluster

import (
	"bytes"
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
