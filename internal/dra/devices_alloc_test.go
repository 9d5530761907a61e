package dra

import "testing"

// TestDevicesAllocationsPerDevice: building a node's DRA devices (every
// agent rescan) costs a bounded number of allocations per device: the
// attributes and capacity of the device, no per-call compilation of a
// format check (Kubernetes' pciBusID helper compiled its regexp on every
// call: about 150 allocations per device in all, against about 43 now).
func TestDevicesAllocationsPerDevice(t *testing.T) {
	s := fixture(t)
	node, pools := nodeState(t, s.Root, "", cfgAll)
	topo := NewSysfsTopology(s.Root)
	devs, _ := Devices(node, pools, topo)
	if len(devs) == 0 {
		t.Fatal("no devices")
	}
	allocs := testing.AllocsPerRun(20, func() { _, _ = Devices(node, pools, topo) })
	perDevice := allocs / float64(len(devs))
	t.Logf("%.0f allocations for %d devices (%.1f per device)", allocs, len(devs), perDevice)
	if perDevice > 80 {
		t.Fatalf("%.1f allocations per device, want at most 80: something compiles or copies per device on every rescan", perDevice)
	}
}
