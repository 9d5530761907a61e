package verbs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

func TestDelStep(t *testing.T) {
	boom := errors.New("cache unreadable")
	tests := []struct {
		name      string
		reread    error
		netns     string
		wantUndo  bool
		wantPodNS bool
		wantErr   error
	}{
		{name: "a concurrent DEL finished: nothing to do", reread: fmt.Errorf("record: %w", os.ErrNotExist)},
		{name: "record unreadable under the lock", reread: boom, wantErr: boom},
		{name: "pod netns gone: undo without it", netns: "/var/run/netns/rdmanet-test-gone", wantUndo: true},
		{name: "no netns given (DEL may omit it)", wantUndo: true},
		{name: "pod netns open", netns: "/proc/self/ns/net", wantUndo: true, wantPodNS: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lock := filepath.Join(t.TempDir(), "dev.lock")
			undone, gotPod := false, false
			err := DelStep{
				Lock:        lock,
				Reread:      func() error { return tc.reread },
				Netns:       tc.netns,
				StrictNetns: true,
				Undo: func(hostNS, podNS ns.NetNS) error {
					undone, gotPod = true, podNS != nil
					if hostNS == nil {
						t.Error("no host netns")
					}
					return nil
				},
			}.Run()
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if undone != tc.wantUndo || gotPod != tc.wantPodNS {
				t.Fatalf("undo ran %v with pod netns %v, want %v/%v", undone, gotPod, tc.wantUndo, tc.wantPodNS)
			}
			if _, err := os.Stat(lock); !os.IsNotExist(err) {
				t.Fatalf("lock file left behind: %v", err)
			}
		})
	}
}
