package guidpool_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmanet/rdmanet/internal/guidpool"
)

// TestExampleHook runs examples/infiniband/sm-hook.sh (a real process,
// through ExecHook) as the node's DEL and the controller's GC run it: the
// GUID joins its PKey's partition fragment on allocate and leaves it on
// release, and a release without a PKey (the GC could not learn it)
// removes the GUID from every partition.
func TestExampleHook(t *testing.T) {
	script, err := filepath.Abs("../../examples/infiniband/sm-hook.sh")
	if err != nil {
		t.Fatal(err)
	}
	smDir := t.TempDir()
	t.Setenv("RDMANET_SM_DIR", smDir)
	h := guidpool.ExecHook{Command: []string{"/bin/sh", script}}
	g1, g2 := guidpool.GUID(0x0200000000000001), guidpool.GUID(0x0200000000000002)
	steps := []struct {
		name   string
		action string
		guid   guidpool.GUID
		pkey   string
		want   map[string]string // fragment file -> content
	}{
		{name: "allocate g1 in 0x8005", action: guidpool.ActionAllocate, guid: g1, pkey: "0x8005",
			want: map[string]string{"0x8005.guids": "0x0200000000000001=full\n"}},
		{name: "allocate g2 in 0x8006", action: guidpool.ActionAllocate, guid: g2, pkey: "0x8006",
			want: map[string]string{"0x8005.guids": "0x0200000000000001=full\n", "0x8006.guids": "0x0200000000000002=full\n"}},
		{name: "allocate without pkey: nothing", action: guidpool.ActionAllocate, guid: 0x0200000000000003,
			want: map[string]string{"0x8005.guids": "0x0200000000000001=full\n", "0x8006.guids": "0x0200000000000002=full\n"}},
		{name: "release g2 with its pkey", action: guidpool.ActionRelease, guid: g2, pkey: "0x8006",
			want: map[string]string{"0x8005.guids": "0x0200000000000001=full\n", "0x8006.guids": ""}},
		{name: "GC release of g1 with the pkey unknown: every partition", action: guidpool.ActionRelease, guid: g1,
			want: map[string]string{"0x8005.guids": "", "0x8006.guids": ""}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			e := guidpool.HookEvent{Action: st.action, GUID: st.guid, PKey: st.pkey, PodNamespace: "ai-training", PodName: "ib-trainer-0", Reason: "pod no longer exists"}
			if err := h.Run(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			for f, want := range st.want {
				b, err := os.ReadFile(filepath.Join(smDir, f))
				if err != nil || string(b) != want {
					t.Errorf("%s = %q (%v), want %q", f, b, err, want)
				}
			}
		})
	}
}
