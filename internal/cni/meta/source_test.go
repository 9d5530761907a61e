package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/rdmanet/rdmanet/internal/devinfo"
)

func writePodManifest(t *testing.T, dir, name, uid string) {
	t.Helper()
	y := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: ai\n  uid: %s\nspec:\n  containers:\n  - name: c\n    image: busybox\n", name, uid)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// TestStaticSourceFollowsDir (found by the soak): one StaticSource serves a
// long-running daemon, so pods created, deleted and recreated after its
// first read are seen, and network-status is refused (ErrNotFound, no file
// written) for a pod that is gone or was recreated, as the API server's
// UID precondition refuses it.
func TestStaticSourceFollowsDir(t *testing.T) {
	ctx := context.Background()
	dir, statusDir := t.TempDir(), t.TempDir()
	s := &StaticSource{Dir: dir, StatusDir: statusDir}
	writePodManifest(t, dir, "p0", "uid-0")
	status := []nadv1.NetworkStatus{{Name: "net", Interface: "net1"}}
	steps := []struct {
		name    string
		change  func()
		pod     string
		uid     string
		found   bool
		written bool
	}{
		{name: "present at the first read", pod: "p0", uid: "uid-0", found: true, written: true},
		{name: "created after the first read", change: func() { writePodManifest(t, dir, "p1", "uid-1") }, pod: "p1", uid: "uid-1", found: true, written: true},
		{name: "deleted", change: func() { os.Remove(filepath.Join(dir, "p1.yaml")) }, pod: "p1", uid: "uid-1"},
		{name: "recreated with another UID", change: func() { writePodManifest(t, dir, "p0", "uid-0b") }, pod: "p0", uid: "uid-0", found: true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.change != nil {
				time.Sleep(10 * time.Millisecond) // a distinct directory mtime on coarse clocks
				st.change()
			}
			os.Remove(s.StatusPath("ai", st.pod))
			_, err := s.Pod(ctx, "ai", st.pod)
			if st.found != (err == nil) {
				t.Fatalf("Pod(ai/%s) = %v, want found %v", st.pod, err, st.found)
			}
			if !st.found && !errors.Is(err, ErrNotFound) {
				t.Fatalf("Pod(ai/%s) = %v, want ErrNotFound", st.pod, err)
			}
			err = s.SetNetworkStatus(ctx, "ai", st.pod, k8stypes.UID(st.uid), devinfo.Statuses(status))
			if st.written != (err == nil) {
				t.Fatalf("SetNetworkStatus(ai/%s, %s) = %v, want written %v", st.pod, st.uid, err, st.written)
			}
			if !st.written && !errors.Is(err, ErrNotFound) {
				t.Fatalf("SetNetworkStatus = %v, want ErrNotFound (a permanent error for the daemon's status writer: it does not retry)", err)
			}
			if _, serr := os.Stat(s.StatusPath("ai", st.pod)); st.written != (serr == nil) {
				t.Fatalf("status file exists: %v, want %v", serr == nil, st.written)
			}
		})
	}
}
