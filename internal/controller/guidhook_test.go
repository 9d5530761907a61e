package controller

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdmanet/rdmanet/internal/guidpool"
)

func TestGUIDPoolConfigFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{name: "repeatable", args: []string{"--guid-pool-config=/etc/rdmanet/a.json", "--guid-pool-config", "/etc/rdmanet/b.json"}, want: []string{"/etc/rdmanet/a.json", "/etc/rdmanet/b.json"}},
		{name: "none", args: nil},
		{name: "relative", args: []string{"--guid-pool-config=guid-pool.json"}, wantErr: "absolute path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			o, err := ParseFlags(tc.args, &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(o.GUIDPoolConfigs, tc.want) {
				t.Fatalf("GUIDPoolConfigs = %q (%v), want %q", o.GUIDPoolConfigs, err, tc.want)
			}
		})
	}
}

func TestLoadGUIDHooks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, conf string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const rng = `"ranges":[{"start":"02:00:00:00:00:00:00:01","end":"02:00:00:00:00:00:00:ff"}]`
	withHook := write("a.json", `{"name":"a",`+rng+`,"hook":["/opt/rdmanet/sm-hook.sh"],"hookTimeout":"5s"}`)
	noHook := write("b.json", `{"name":"b",`+rng+`}`)
	sameAsA := write("a2.json", `{"name":"a",`+rng+`}`)
	bad := write("bad.json", `{"name":"c"}`)
	tests := []struct {
		name      string
		paths     []string
		wantHooks []string
		wantWarn  string
		wantErr   string
	}{
		{name: "a hook per pool network; a pool without hook warned", paths: []string{withHook, noHook}, wantHooks: []string{"infiniband-guid/a"}, wantWarn: `pool "b" has no hook`},
		{name: "one pool twice", paths: []string{withHook, sameAsA}, wantErr: "also configured by"},
		{name: "missing file", paths: []string{filepath.Join(dir, "none.json")}, wantErr: "mount the nodes' GUID pool config"},
		{name: "invalid config", paths: []string{bad}, wantErr: `"ranges"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hooks, warnings, err := LoadGUIDHooks(tc.paths)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var nets []string
			for n, h := range hooks {
				nets = append(nets, n)
				if eh, ok := h.(guidpool.ExecHook); !ok || eh.Command[0] != "/opt/rdmanet/sm-hook.sh" || eh.Timeout.String() != "5s" {
					t.Errorf("hook of %s = %+v", n, h)
				}
			}
			if !slices.Equal(nets, tc.wantHooks) || !strings.Contains(strings.Join(warnings, "\n"), tc.wantWarn) {
				t.Errorf("hooks %v warnings %q, want %v and %q", nets, warnings, tc.wantHooks, tc.wantWarn)
			}
		})
	}
}

// TestKeepIBStatus: the cache keeps the network-status of IB pods only.
func TestKeepIBStatus(t *testing.T) {
	ib := `[{"name":"ai-training/ib-training","interface":"net1","infiniband":{"guid":"02:00:00:00:00:00:00:01","pkey":"0x8005","plugin":"ib-sriov"}}]`
	roce := `[{"name":"ai-training/face-training-rdma","interface":"net1","mac":"02:00:00:41:00:02"}]`
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want map[string]string
	}{
		{name: "IB pod", ann: map[string]string{networkStatusAnnotation: ib, "other": "x"}, want: map[string]string{networkStatusAnnotation: ib}},
		{name: "RoCE pod", ann: map[string]string{networkStatusAnnotation: roce}},
		{name: "no annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Annotations: tc.ann}}
			out, err := stripObject(p)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*corev1.Pod).Annotations
			if len(got) != len(tc.want) || got[networkStatusAnnotation] != tc.want[networkStatusAnnotation] {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}
