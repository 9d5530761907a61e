package sysfsfixture_test

import (
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfs"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// gpuPlace is where a GPU sits: address, NUMA node, PCIe root, root port.
type gpuPlace struct {
	bdf, root, port string
	numa            int
}

func TestStandardGPUs(t *testing.T) {
	tests := []struct {
		name string
		gpus int
		want []gpuPlace
	}{
		{name: "default has none", gpus: 0},
		{name: "four: two beside the exclusive PF, one under each NUMA 1 root", gpus: 4, want: []gpuPlace{
			{"0000:42:00.0", "pci0000:40", "0000:40:03.0", 0},
			{"0000:43:00.0", "pci0000:40", "0000:40:04.0", 0},
			{"0000:82:00.0", "pci0000:80", "0000:80:03.0", 1},
			{"0000:c2:00.0", "pci0000:c0", "0000:c0:03.0", 1},
		}},
		{name: "odd count: NUMA 0 gets the extra one", gpus: 3, want: []gpuPlace{
			{"0000:42:00.0", "pci0000:40", "0000:40:03.0", 0},
			{"0000:43:00.0", "pci0000:40", "0000:40:04.0", 0},
			{"0000:82:00.0", "pci0000:80", "0000:80:03.0", 1},
		}},
		{name: "eight: an HGX board, four per socket", gpus: 8, want: []gpuPlace{
			{"0000:42:00.0", "pci0000:40", "0000:40:03.0", 0},
			{"0000:43:00.0", "pci0000:40", "0000:40:04.0", 0},
			{"0000:44:00.0", "pci0000:40", "0000:40:05.0", 0},
			{"0000:45:00.0", "pci0000:40", "0000:40:06.0", 0},
			{"0000:82:00.0", "pci0000:80", "0000:80:03.0", 1},
			{"0000:83:00.0", "pci0000:80", "0000:80:04.0", 1},
			{"0000:c2:00.0", "pci0000:c0", "0000:c0:03.0", 1},
			{"0000:c3:00.0", "pci0000:c0", "0000:c0:04.0", 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sysfsfixture.NewStandard(t.TempDir(), sysfsfixture.StandardOptions{GPUs: tc.gpus})
			if err != nil {
				t.Fatal(err)
			}
			var got []gpuPlace
			for _, g := range s.GPUs {
				got = append(got, gpuPlace{g.BDF, g.PCIRoot, g.Upstream, g.NUMA})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("layout:\n got %v\nwant %v", got, tc.want)
			}
			// what sysfs shows, read the way the inventory reads it
			fs := sysfs.New(s.Root)
			for _, w := range tc.want {
				for attr, val := range map[string]string{"vendor": "10de", "device": "2330", "class": "030200"} {
					if got := fs.HexID(w.bdf, attr); got != val {
						t.Errorf("%s %s = %q, want %q", w.bdf, attr, got, val)
					}
				}
				if got, _ := fs.ReadAttr(w.bdf, "numa_node"); got != strconv.Itoa(w.numa) {
					t.Errorf("%s numa_node = %q, want %d", w.bdf, got, w.numa)
				}
				path, err := fs.ResolvedPath(w.bdf)
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join(w.root, w.port, w.bdf); path != want {
					t.Errorf("%s resolves to %s, want %s", w.bdf, path, want)
				}
				if drv, _ := filepath.EvalSymlinks(filepath.Join(fs.PCIDevicePath(w.bdf), "driver")); filepath.Base(drv) != "nvidia" {
					t.Errorf("%s driver = %q, want nvidia", w.bdf, drv)
				}
			}
			// the NICs keep their places and the inventory (network
			// functions only) does not see the GPUs
			node, err := inventory.Discover(inventory.Options{SysfsRoot: s.Root})
			if err != nil {
				t.Fatal(err)
			}
			var roce *inventory.Function
			for _, f := range node.Functions {
				if strings.HasPrefix(f.Vendor, "10de") {
					t.Errorf("inventory lists GPU %s as a network function", f.BDF)
				}
				if f.BDF == s.RoCE.BDF {
					roce = f
				}
			}
			if roce == nil || roce.PCIRoot != "pci0000:40" || roce.NUMA != 0 || roce.NumVFs != 16 {
				t.Errorf("RoCE PF changed: %+v", roce)
			}
		})
	}
}

func TestStandardGPUsRejectsBadCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		gpus int
	}{
		{"negative", -1},
		{"more than the buses hold", sysfsfixture.MaxStandardGPUs + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// NewStandard lays its GPUs out with StandardGPUs
			if _, err := sysfsfixture.StandardGPUs(tc.gpus); err == nil {
				t.Fatalf("StandardGPUs accepted %d GPUs", tc.gpus)
			}
		})
	}
}

func TestStandardGPUsMaxFits(t *testing.T) {
	gpus, err := sysfsfixture.StandardGPUs(sysfsfixture.MaxStandardGPUs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, g := range gpus {
		bus, _ := strconv.ParseInt(g.BDF[5:7], 16, 32)
		root, _ := strconv.ParseInt(strings.TrimPrefix(g.PCIRoot, "pci0000:"), 16, 32)
		// root+1 is the NIC's bus; the next root starts at root+0x40
		if seen[bus] || bus < root+2 || bus >= root+0x40 {
			t.Fatalf("GPU %s: bus taken or outside root %s's buses", g.BDF, g.PCIRoot)
		}
		seen[bus] = true
	}
}
