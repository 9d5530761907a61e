package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The overlay's pool config must be the runnable example's (kustomize
// cannot read files outside the overlay, so it is a copy).
func TestOverlayPoolsMatchExample(t *testing.T) {
	a, err := os.ReadFile(filepath.Join("overlay", "pools.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cluster", "pools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("test/cluster/overlay/pools.json differs from examples/cluster/pools.json; copy the example over it")
	}
}

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
