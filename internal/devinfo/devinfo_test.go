package devinfo

import (
	"os"
	"path/filepath"
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
