package doctor_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/doctor"
	"github.com/rdmanet/rdmanet/internal/inventory"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

// TestIBChecks: on InfiniBand what matters is LID and SM LID set (a subnet
// manager configured the port), a PKey table, the pod's PKeys in it with
// full membership, and no GID index.
func TestIBChecks(t *testing.T) {
	type want struct {
		id, status string
		in         []string
	}
	for _, tc := range []struct {
		name  string
		opts  sysfsfixture.IBNodeOptions
		edit  func(*sysfsfixture.IBNode) error
		pkeys []uint16
		env   map[string]string
		want  []want
	}{
		{name: "healthy fabric", want: []want{
			{doctor.IDIBPort, "pass", []string{"mlx5_2 port 1 (ibp193s0f1): LID 0x12, SM LID 0x1, PKeys 0xffff 0x8005 0x8006, port GUID 0c:42:a1:03:00:65:8e:82"}},
			{doctor.IDIBPort, "pass", []string{"mlx5_3 port 1: LID 0x13"}},
		}},
		{name: "no subnet manager", opts: sysfsfixture.IBNodeOptions{NoSM: true}, want: []want{
			{doctor.IDIBPort, "fail", []string{"mlx5_1 port 1 (ibp193s0f0): LID 0", "opensm"}},
		}},
		{name: "SM LID lost", edit: func(n *sysfsfixture.IBNode) error {
			return n.SetIBPort(n.Port1.RDMADev, sysfsfixture.IBPort{LID: 0x12, PKeys: []uint16{0xffff}})
		}, want: []want{{doctor.IDIBPort, "fail", []string{"mlx5_2", "SM LID 0"}}}},
		{name: "the pod's PKey", pkeys: []uint16{0x8006}, want: []want{
			{doctor.IDIBPKey, "pass", []string{"mlx5_2 port 1 (ibp193s0f1): full member of PKey 0x8006"}},
			{doctor.IDIBPKey, "fail", []string{"mlx5_1 port 1 (ibp193s0f0): PKey 0x8006 is not in the port's table (0xffff 0x8005)", "partitions.conf", "0c:42:a1:03:00:65:8e:81"}},
		}},
		{name: "limited membership", pkeys: []uint16{0x0007}, edit: func(n *sysfsfixture.IBNode) error {
			return n.SetIBPort(n.Port1.RDMADev, sysfsfixture.IBPort{LID: 0x12, SMLID: 1, PKeys: []uint16{0xffff, 0x0007}})
		}, want: []want{{doctor.IDIBPKey, "warn", []string{"mlx5_2", "limited member of PKey 0x0007"}}}},
		{name: "no GID index on IB", env: map[string]string{"NCCL_IB_HCA": "mlx5_2", "NCCL_IB_GID_INDEX": "3"}, want: []want{
			{doctor.IDNCCLGIDIndex, "pass", []string{"InfiniBand needs no GID index"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sys")
			n, err := sysfsfixture.NewIBNode(root, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				if err := tc.edit(n); err != nil {
					t.Fatal(err)
				}
			}
			node, err := inventory.Discover(inventory.Options{SysfsRoot: root, NetnsModeFlag: "shared"})
			if err != nil {
				t.Fatal(err)
			}
			rep := doctor.Run(&doctor.Input{SysfsRoot: root, Node: node, PKeys: tc.pkeys, Env: tc.env, EnvSource: "test"})
			for _, w := range tc.want {
				found := false
				for _, c := range rep.Checks {
					if c.ID != w.id || string(c.Status) != w.status {
						continue
					}
					ok := true
					for _, s := range w.in {
						ok = ok && (strings.Contains(c.Message, s) || strings.Contains(c.Fix, s))
					}
					found = found || ok
				}
				if !found {
					var got []string
					for _, c := range rep.Checks {
						if c.ID == w.id {
							got = append(got, string(c.Status)+": "+c.Message+" | "+c.Fix)
						}
					}
					t.Errorf("no %s %s check with %q; %s checks:\n%s", w.status, w.id, w.in, w.id, strings.Join(got, "\n"))
				}
			}
		})
	}
}
