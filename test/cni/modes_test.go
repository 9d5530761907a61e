package cni_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// TestStateFilesRootOnly: after a real ADD of the seed chain (sriov -> rdma
// -> rdmanet-ipam, exec'd through libcni), every file the plugins keep is
// 0600 and every directory 0700 — also when the directories existed with
// looser modes before (a hostPath mount, an older release).
func TestStateFilesRootOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		preMode os.FileMode // 0: the dirs do not exist before ADD
	}{
		{name: "dirs created by the plugins"},
		{name: "dirs left 0755 are tightened", preMode: 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 2)
			if tc.preMode != 0 {
				// the plugins' own dirs (RDMANET_CNI_STATE_DIR/<plugin>, the
				// IPAM store); their parent is the node's, not theirs
				if err := os.MkdirAll(n.stateDir, 0o700); err != nil {
					t.Fatal(err)
				}
				for _, d := range []string{filepath.Join(n.stateDir, "sriov"), filepath.Join(n.stateDir, "rdma"), n.ipamDir} {
					if err := os.MkdirAll(d, tc.preMode); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(d, tc.preMode); err != nil {
						t.Fatal(err)
					}
				}
			}
			const i = 1
			pod := netnsutil.NewNS(t)
			l := confList(t, seedNAD, "1.0.0", vfBDF(i))
			if _, err := n.add(l, rt(i, pod)); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			files := 0
			for _, dir := range []string{n.stateDir, n.ipamDir} {
				err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					fi, err := d.Info()
					if err != nil {
						return err
					}
					want := os.FileMode(0o600)
					if d.IsDir() {
						want = 0o700
					} else {
						files++
					}
					if fi.Mode().Perm() != want {
						t.Errorf("%s: mode %04o, want %04o", p, fi.Mode().Perm(), want)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			// the sriov and rdma caches and the IPAM store at least
			if files < 3 {
				t.Errorf("only %d state files under %s and %s", files, n.stateDir, n.ipamDir)
			}
			if err := n.del(l, rt(i, pod)); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}
