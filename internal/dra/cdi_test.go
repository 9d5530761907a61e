package dra

import (
	"slices"
	"testing"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// TestCDISpecsLoadInRuntimeCache: the spec files Prepare writes are what a
// container runtime's CDI registry (the CDI library containerd and CRI-O
// use) loads without errors, resolving exactly the CDI IDs Prepare returns
// to kubelet, with their environment; Unprepare makes them go.
func TestCDISpecsLoadInRuntimeCache(t *testing.T) {
	e := newDriverEnv(t)
	d := e.driver(t)
	var ids []string
	for _, c := range []struct {
		uid  string
		devs []alloc
	}{
		{"uid-a", []alloc{{"nics", "vf-0000-41-00-2"}, {"nics", "vf-0000-41-00-3"}}},
		{"uid-b", []alloc{{"rdma", "hca-0000-81-00-0"}, {"ib", "vf-0000-c1-00-2"}}},
	} {
		r := prepare(t, d, newClaim(c.uid, c.uid, c.devs...))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, dev := range r.Devices {
			ids = append(ids, dev.CDIDeviceIDs...)
		}
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(e.cdi), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("CDI cache: %v", err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI cache errors: %v", errs)
	}
	slices.Sort(ids)
	if got := cache.ListDevices(); !slices.Equal(got, ids) {
		t.Errorf("CDI cache resolves %v, Prepare returned %v", got, ids)
	}
	dev := cache.GetDevice(CDIKind + "=uid-a-vf-0000-41-00-2")
	if dev == nil {
		t.Fatal("first VF of uid-a not resolved")
	}
	if env := dev.ContainerEdits.Env; !slices.Equal(env, []string{"PCIDEVICE_EXAMPLE_COM_SRIOV_RDMA=0000:41:00.2,0000:41:00.3", "NCCL_IB_HCA==mlx5_4,mlx5_5", "NCCL_IB_GID_INDEX=3"}) {
		t.Errorf("env of the request's first VF: %v", env)
	}
	if err := unprepare(t, d, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if err := cache.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, id := range cache.ListDevices() {
		if slices.Contains(ids[:2], id) {
			t.Errorf("%s still resolvable after Unprepare", id)
		}
	}
	if n := len(cache.ListDevices()); n != 2 {
		t.Errorf("%d devices left, want uid-b's 2", n)
	}
}
