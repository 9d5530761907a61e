package dragpu

import (
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestDiscover: the GPUs found in a fixture's sysfs carry the PCIe root
// the fixture laid them out under, on the paired node and on the standard
// node (where GPUs share roots with NICs), and NICs are not taken for GPUs.
func TestDiscover(t *testing.T) {
	paired, err := NewPairedNode(t.TempDir(), 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	std, err := sysfsfixture.NewStandard(t.TempDir(), sysfsfixture.StandardOptions{GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	pairedWant := map[string]string{}
	for _, p := range paired.Pairs {
		pairedWant[p.GPU.BDF] = p.Root
	}
	stdWant := map[string]string{}
	for _, g := range std.GPUs {
		stdWant[g.BDF] = g.PCIRoot
	}
	for _, tc := range []struct {
		name string
		root string
		want map[string]string
	}{
		{"paired node: one GPU per root", paired.Root, pairedWant},
		{"standard node: GPUs beside the NICs", std.Root, stdWant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := Discover(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != len(tc.want) {
				t.Fatalf("found %d GPUs %+v, want %d", len(gpus), gpus, len(tc.want))
			}
			for i, g := range gpus {
				if r, ok := tc.want[g.BDF]; !ok || r != g.PCIeRoot || g.Index != i {
					t.Errorf("GPU %+v: want root %q (found: %v), index %d", g, r, ok, i)
				}
			}
			devs := Devices("n", gpus)
			if len(devs) != len(gpus) || *devs[0].Attributes["resource.kubernetes.io/pcieRoot"].StringValue != gpus[0].PCIeRoot {
				t.Errorf("devices %+v do not carry the GPUs' pcieRoot", devs)
			}
		})
	}
}
