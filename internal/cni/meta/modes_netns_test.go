package meta_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/devinfo"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// TestStateModesAfterRealAdd: a real ADD through the shim and a running
// rdmanet-daemon, then every file under the plugin's cniDir (records,
// libcni's results, network-status) is 0600 and every dir 0700 — cniDir
// itself was left 0755 by the rig and is tightened — and the daemon's two
// sockets are 0600 in a dir it created 0700.
func TestStateModesAfterRealAdd(t *testing.T) {
	r := newRig(t)
	r.nad("ai-training", "face-training-rdma", "example.com/sriov_rdma", macvlanConf("face-training-rdma", "roce0", "10.60.1.0/24", r))
	r.podManifest("ai-training", "trainer-0", `[{"name": "face-training-rdma", "interface": "net1"}]`, `example.com/sriov_rdma: "1"`)
	r.pr.pods["ai-training/trainer-0"] = map[string][]string{"example.com/sriov_rdma": {"0000:41:00.4"}}
	if err := devinfo.Write(filepath.Join(r.dir, "devinfo"), "example.com/sriov_rdma", "0000:41:00.4", devinfo.PCI("0000:41:00.4", "0000:41:00.0", "mlx5_6")); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(r.dir, "run", "rdmanet")
	sock, plugins := filepath.Join(runDir, "daemon.sock"), filepath.Join(runDir, "plugins.sock")
	r.conf["daemonSocket"] = sock
	b, err := json.Marshal(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	r.write("rdmanet.conf", string(b))
	logf, err := os.Create(filepath.Join(r.dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(r.bin, "rdmanet-daemon"), "--config", filepath.Join(r.dir, "rdmanet.conf"), "--plugin-socket", plugins)
	cmd.Stdout, cmd.Stderr = logf, logf
	netnsutil.Do(t, r.host, cmd.Start)
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, e1 := os.Stat(sock)
		_, e2 := os.Stat(plugins)
		if e1 == nil && e2 == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(r.dir, "daemon.log"))
			t.Fatalf("daemon did not come up:\n%s", b)
		}
	}
	if _, err := r.add("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
	r.eventualStatus("ai-training", "trainer-0")

	want := map[string]os.FileMode{
		sock: os.ModeSocket | 0o600, plugins: os.ModeSocket | 0o600, runDir: os.ModeDir | 0o700,
		devinfo.Path(filepath.Join(r.dir, "devinfo"), "example.com/sriov_rdma", "0000:41:00.4"): 0o600,
	}
	cniDir := r.conf["cniDir"].(string)
	seen := map[string]bool{}
	err = filepath.WalkDir(cniDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			want[p] = os.ModeDir | 0o700
		} else {
			want[p] = 0o600
			seen[filepath.Base(filepath.Dir(p))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"cache", "results", "status"} {
		if !seen[sub] {
			t.Errorf("no file in %s/.../%s after ADD: the walk would prove nothing", cniDir, sub)
		}
	}
	for p, m := range want {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode() != m {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), m)
		}
	}
	if err := r.del("1.0.0", "c1", "ai-training", "trainer-0"); err != nil {
		t.Fatal(err)
	}
}
