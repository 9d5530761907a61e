package cluster

import (
	"bytes"
	"testing"
)

// The overlay's pools.json is checked against examples/cluster/pools.json by
// examples/cluster (TestOverlayPoolsAreThese).

func TestKubeletConfigForThisMachine(t *testing.T) {
	l := Layout{Dir: "/state", Repo: "/repo"}
	cfg := kubeletConfig(l)
	for _, want := range []string{"failCgroupV1: false", "cgroupRoot: " + CgroupRoot, "containerRuntimeEndpoint: unix://" + ContainerdSocket} {
		if !bytes.Contains([]byte(cfg), []byte(want)) {
			t.Errorf("kubelet config lacks %q:\n%s", want, cfg)
		}
	}
	cd := containerdConfig(l)
	for _, want := range []string{"restrict_oom_score_adj = true", "sandbox = \"" + PauseImage + "\"", "version = 3"} {
		if !bytes.Contains([]byte(cd), []byte(want)) {
			t.Errorf("containerd config lacks %q:\n%s", want, cd)
		}
	}
}
