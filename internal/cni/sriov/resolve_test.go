package sriov

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/sysfs"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func TestResolve(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sys")
	fix, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: 4})
	if err != nil {
		t.Fatal(err)
	}
	dpdk := sysfsfixture.Function{BDF: "0000:a1:00.0", Vendor: sysfsfixture.VendorIntel, Device: sysfsfixture.DeviceX710, Driver: "i40e",
		Netdev: "ens9f0", TotalVFs: 2, NumVFs: 1, VFDriver: "vfio-pci", VFNetdev: func(int) string { return "" }}
	if err := fix.AddFunction(dpdk); err != nil {
		t.Fatal(err)
	}
	p := &Plugin{Sysfs: sysfs.New(root)}
	for _, tc := range []struct {
		name    string
		bdf     string
		want    vfInfo
		wantErr []string
	}{
		{name: "VF 3 of the RoCE PF", bdf: sysfsfixture.VFBDF("0000:41:00.0", 3), want: vfInfo{PFBDF: "0000:41:00.0", PF: "enp65s0f0np0", Index: 3}},
		{name: "a PF", bdf: "0000:41:00.0", wantErr: []string{"must be an SR-IOV VF", "not PFs"}},
		{name: "a plain NIC", bdf: "0000:17:00.0", wantErr: []string{"must be an SR-IOV VF"}},
		{name: "absent", bdf: "0000:99:00.1", wantErr: []string{"present under", "sriov_numvfs"}},
		{name: "VF bound to vfio-pci", bdf: sysfsfixture.VFBDF("0000:a1:00.0", 0), wantErr: []string{"vfio-pci", "DPDK"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.resolve(tc.bdf)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("resolve = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrBadDeviceID) {
				t.Fatalf("error %v, want ErrBadDeviceID", err)
			}
			for _, w := range append(tc.wantErr, tc.bdf) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
