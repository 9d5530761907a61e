package devinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReadRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dp")
	if got, err := Read(dir, "example.com/sriov_rdma", "0000:41:00.2"); got != nil || err != nil {
		t.Fatalf("missing file: %v, %v", got, err)
	}
	info := PCI("0000:41:00.2", "0000:41:00.0", "mlx5_4")
	for i := 0; i < 2; i++ { // second write replaces the first
		if err := Write(dir, "example.com/sriov_rdma", "0000:41:00.2", info); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(dir, "example.com-sriov_rdma-0000:41:00.2-device.json")
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("upstream file name not used: %v", err)
	}
	for p, mode := range map[string]os.FileMode{dir: 0o700, want: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %04o", p, fi.Mode().Perm(), err, mode)
		}
	}
	if string(b) != `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:41:00.2","rdma-device":"mlx5_4","pf-pci-address":"0000:41:00.0"}}` {
		t.Fatalf("content = %s", b)
	}
	got, err := Read(dir, "example.com/sriov_rdma", "0000:41:00.2")
	if err != nil || got.Pci.RdmaDevice != "mlx5_4" {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if err := Remove(dir, "example.com/sriov_rdma", "0000:41:00.2"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, "example.com/sriov_rdma", "0000:41:00.2"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if err := os.WriteFile(Path(dir, "r/x", "1"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir, "r/x", "1"); err == nil {
		t.Fatal("want error for malformed file")
	}
}

// TestNamesStayInDir: whatever kubelet or a pool config passes as resource
// or device ID, the file is a plain name in dir, or the call is refused.
func TestNamesStayInDir(t *testing.T) {
	tests := []struct {
		name, resource, deviceID string
		wantErr                  string
	}{
		{name: "device id ../../etc/x", resource: "example.com/sriov_rdma", deviceID: "../../etc/x"},
		{name: "resource ..", resource: "..", deviceID: ".."},
		{name: "absolute device id", resource: "r", deviceID: "/etc/passwd"},
		{name: "NUL", resource: "r", deviceID: "a\x00b", wantErr: "NUL"},
		{name: "over-long", resource: "r", deviceID: strings.Repeat("a", 300), wantErr: "more than 255"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "a", "dp")
			err := Write(dir, tc.resource, tc.deviceID, PCI("0000:41:00.2", "", ""))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if _, rerr := Read(dir, tc.resource, tc.deviceID); rerr == nil {
					t.Fatal("Read accepted the name")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && filepath.Dir(p) != dir {
					t.Errorf("file outside %s: %s", dir, p)
				}
				return nil
			})
		})
	}
}
