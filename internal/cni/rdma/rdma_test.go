package rdma

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		loose    bool
		deviceID string
		wantErr  error
		wantIn   []string
	}{
		{name: "seed step with injected deviceID", in: `{"cniVersion":"0.3.1","name":"face-training-rdma","type":"rdma","deviceID":"0000:41:00.2"}`, deviceID: "0000:41:00.2"},
		{name: "runtimeConfig deviceID", in: `{"cniVersion":"1.0.0","name":"n","type":"rdma","runtimeConfig":{"deviceID":"0000:41:00.5"},"args":{"cni":{"debug":true}}}`, deviceID: "0000:41:00.5"},
		{name: "missing deviceID", in: `{"cniVersion":"1.0.0","name":"n","type":"rdma"}`, wantErr: ErrMissingDeviceID,
			wantIn: []string{`"deviceID"`, "k8s.v1.cni.cncf.io/resourceName"}},
		{name: "missing deviceID is fine for DEL", in: `{"cniVersion":"1.0.0","name":"n","type":"rdma"}`, loose: true},
		{name: "bad deviceID", in: `{"cniVersion":"1.0.0","name":"n","type":"rdma","deviceID":"mlx5_4"}`, wantErr: ErrBadDeviceID, wantIn: []string{`"mlx5_4"`}},
		{name: "malformed", in: `[`, wantErr: ErrBadJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := Parse
			if tc.loose {
				parse = ParseLoose
			}
			c, err := parse([]byte(tc.in))
			if tc.wantErr == nil {
				if err != nil || c.DeviceID != tc.deviceID {
					t.Fatalf("got %+v, %v; want deviceID %q", c, err, tc.deviceID)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestRDMADevice(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sys")
	fix, err := sysfsfixture.NewStandard(root, sysfsfixture.StandardOptions{RoCEVFs: 2})
	if err != nil {
		t.Fatal(err)
	}
	noRDMA := sysfsfixture.Function{BDF: "0000:a1:00.0", Vendor: sysfsfixture.VendorMellanox, Device: sysfsfixture.DeviceCX6Dx, Driver: "mlx5_core",
		Netdev: "ens9f0np0", RDMADev: fix.NextRDMAName(), TotalVFs: 1, NumVFs: 1, VFNoRDMA: true}
	if err := fix.AddFunction(noRDMA); err != nil {
		t.Fatal(err)
	}
	p := &Plugin{Sysfs: sysfs.New(root)}
	for _, tc := range []struct {
		name    string
		bdf     string
		want    string
		wantErr error
	}{
		{name: "RoCE VF 1", bdf: sysfsfixture.VFBDF("0000:41:00.0", 1), want: fix.RDMAByBD[sysfsfixture.VFBDF("0000:41:00.0", 1)]},
		{name: "VF without RDMA", bdf: sysfsfixture.VFBDF("0000:a1:00.0", 0), wantErr: ErrNoRDMADevice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.RDMADevice(tc.bdf)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("RDMADevice = %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCheckExclusive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    string
		wantErr error
	}{
		{name: "exclusive", mode: netops.RDMANetnsExclusive},
		{name: "shared", mode: netops.RDMANetnsShared, wantErr: ErrNotExclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := netops.NewRecorder(filepath.Join(t.TempDir(), "state.json"))
			if err := rec.SetNetnsMode(tc.mode); err != nil {
				t.Fatal(err)
			}
			err := (&Plugin{RDMA: rec}).checkExclusive()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("checkExclusive = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "rdma system set netns exclusive") {
				t.Errorf("error %q lacks the fix", err)
			}
		})
	}
}
