package verbs

import (
	"fmt"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/rdmanet/rdmanet/internal/cni/confkeys"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/internal/sysfs"
)

func TestFromEnv(t *testing.T) {
	hooks := netops.TestHooks()
	tests := []struct {
		name         string
		env          map[string]string
		defState     string
		wantState    string
		wantSysfs    string
		wantFault    bool // a failpoint for the plugin (test builds only)
		wantWarnings int  // in a production build
		wantErr      bool
	}{
		{name: "defaults", defState: "/var/lib/cni/sriov", wantState: "/var/lib/cni/sriov", wantSysfs: sysfs.New("").Root},
		{name: "state dir under RDMANET_CNI_STATE_DIR, named by the plugin", defState: "/var/lib/cni/sriov",
			env: map[string]string{netops.EnvCNIStateDir: "/run/rdmanet/cni"}, wantState: "/run/rdmanet/cni/sriov", wantSysfs: sysfs.New("").Root},
		{name: "a plugin without a state dir gets none", env: map[string]string{netops.EnvCNIStateDir: "/run/rdmanet/cni"}, wantSysfs: sysfs.New("").Root},
		{name: "sysfs root", defState: "/s", wantState: "/s", env: map[string]string{netops.EnvSysfsRoot: "/tmp/fake-sys"}, wantSysfs: "/tmp/fake-sys"},
		{name: "a failpoint: honoured by a test build, warned of by a production one", defState: "/s", wantState: "/s",
			env: map[string]string{netops.EnvFault: "sriov:cache"}, wantSysfs: sysfs.New("").Root, wantFault: hooks, wantWarnings: 1},
		{name: "a simulated NIC for ADD: refused (production) or missing its state file (test)",
			env: map[string]string{netops.EnvImpl: "record", "CNI_COMMAND": "ADD"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var warned []string
			warnf := func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
			e, err := FromEnv(func(k string) string { return tc.env[k] }, "sriov", tc.defState, warnf)
			if (err != nil) != tc.wantErr {
				t.Fatalf("FromEnv: %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if e.StateDir != tc.wantState || e.Sysfs.Root != tc.wantSysfs || (e.Fault != nil) != tc.wantFault {
				t.Errorf("state dir %q, sysfs %q, failpoint %v; want %q, %q, failpoint %v", e.StateDir, e.Sysfs.Root, e.Fault, tc.wantState, tc.wantSysfs, tc.wantFault)
			}
			if e.Ops.VF == nil || e.Ops.RDMA == nil {
				t.Error("no netops")
			}
			want := tc.wantWarnings
			if hooks {
				want = 0
			}
			if len(warned) != want {
				t.Fatalf("warnings %q, want %d", warned, want)
			}
			for _, w := range warned {
				if len(w) < 7 || w[:7] != "sriov: " {
					t.Errorf("warning %q does not name the plugin", w)
				}
			}
			e.Warnf("x")
			if len(warned) != want+1 {
				t.Error("Env.Warnf is not the warnf given")
			}
		})
	}
	if e, err := FromEnv(func(string) string { return "" }, "rdma", "", nil); err != nil || e.Warnf == nil {
		t.Fatalf("FromEnv with no warnf: %v, Warnf %p; want Stderr", err, e.Warnf)
	}
}

func TestWarnUnknownKeys(t *testing.T) {
	tests := []struct {
		name     string
		findings []confkeys.Finding
		want     []string
	}{
		{name: "none: silent"},
		{name: "each key: the finding, network, container and where the keys are listed",
			findings: []confkeys.Finding{{Plugin: "sriov", Key: "vlan_id", Hint: "vlan"}, {Plugin: "sriov", Key: "foo"}},
			want: []string{
				fmt.Sprintf("%s (network \"net-a\", container c1); the keys are listed in docs/cni.md", confkeys.Finding{Plugin: "sriov", Key: "vlan_id", Hint: "vlan"}),
				fmt.Sprintf("%s (network \"net-a\", container c1); the keys are listed in docs/cni.md", confkeys.Finding{Plugin: "sriov", Key: "foo"}),
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			WarnUnknownKeys(func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) }, &skel.CmdArgs{ContainerID: "c1"}, "net-a", tc.findings, "the keys are listed in docs/cni.md")
			if !slices.Equal(got, tc.want) {
				t.Fatalf("warnings\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
