package verbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

func TestOpenAdd(t *testing.T) {
	tests := []struct {
		name    string
		netns   string
		dirFile bool // the state dir's path is a file
		wantErr string
	}{
		{name: "held", netns: "/proc/self/ns/net"},
		{name: "pod netns gone", netns: "/var/run/netns/rdmanet-test-gone", wantErr: `open pod netns "/var/run/netns/rdmanet-test-gone"`},
		{name: "state dir unusable", netns: "/proc/self/ns/net", dirFile: true, wantErr: "private directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if tc.dirFile {
				if err := os.WriteFile(dir, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lock := filepath.Join(dir, "dev.lock")
			h, err := OpenAdd(tc.netns, dir, lock)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("OpenAdd: %v, want %q in it", err, tc.wantErr)
				}
				if _, err := os.Stat(lock); err == nil {
					t.Fatal("lock file made by a failed OpenAdd")
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenAdd: %v", err)
			}
			if h.PodNS == nil || h.HostNS == nil {
				t.Fatal("a netns is not open")
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("state dir: %v %v, want mode 0700", fi, err)
			}
			if _, err := os.Stat(lock); err != nil {
				t.Fatalf("lock file: %v", err)
			}
			h.Close()
			if _, err := os.Stat(lock); !os.IsNotExist(err) {
				t.Fatalf("lock file left behind: %v", err)
			}
		})
	}
}

func TestOpenAddRecord(t *testing.T) {
	inUse := errors.New("VF in use")
	tests := []struct {
		name        string
		netns       string
		stored      string // the record file's content ("" none)
		reclaimErr  error
		wantReclaim bool
		wantErr     string
	}{
		{name: "no record: held", netns: "/proc/self/ns/net"},
		{name: "a record left: reclaimed, then held", netns: "/proc/self/ns/net", stored: `{"containerID":"old","ifName":"net1"}`, wantReclaim: true},
		{name: "a record left: reclaim refuses", netns: "/proc/self/ns/net", stored: `{"containerID":"old","ifName":"net1"}`,
			reclaimErr: inUse, wantReclaim: true, wantErr: "VF in use"},
		{name: "a record that does not read", netns: "/proc/self/ns/net", stored: `{`, wantErr: "test cache"},
		{name: "pod netns gone: the record is not looked at", netns: "/var/run/netns/rdmanet-test-gone", stored: `{"containerID":"old"}`,
			wantErr: `open pod netns "/var/run/netns/rdmanet-test-gone"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			records := testRecords(t)
			if tc.stored != "" {
				if err := os.WriteFile(records.Path(testBDF), []byte(tc.stored), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var reclaimed *testRec
			h, err := OpenAddRecord(tc.netns, records, testBDF, func(r *testRec, hostNS ns.NetNS) error {
				if hostNS == nil {
					t.Error("reclaim without the host netns")
				}
				reclaimed = r
				return tc.reclaimErr
			})
			if (reclaimed != nil) != tc.wantReclaim || (reclaimed != nil && reclaimed.ContainerID != "old") {
				t.Errorf("reclaim got %+v, want the old record: %v", reclaimed, tc.wantReclaim)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("OpenAddRecord: %v, want %q in it", err, tc.wantErr)
				}
				if _, err := os.Stat(records.LockPath(testBDF)); !os.IsNotExist(err) {
					t.Fatalf("lock held after a failed OpenAddRecord: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenAddRecord: %v", err)
			}
			if _, err := os.Stat(records.LockPath(testBDF)); err != nil {
				t.Fatalf("lock file: %v", err)
			}
			h.Close()
		})
	}
}
