package inproc

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// TestServe: a forwarded call runs in-process only for the daemon's own
// build of that plugin; otherwise Serve declines (does nothing) with why.
func TestServe(t *testing.T) {
	buildOf := func(name string) string {
		bi, err := buildinfo.ReadFile(filepath.Join(binDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return bi.String()
	}
	ipamBuild := buildOf("rdmanet-ipam")
	store := t.TempDir()
	conf := `{"cniVersion":"1.0.0","name":"n","ipam":{"type":"rdmanet-ipam","range":"10.9.0.0/24","store":{"type":"local","path":"` + store + `"}}}`
	env := func(cmd string, extra ...string) []string {
		return append([]string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=net1",
			"CNI_PATH=" + binDir, "NODENAME=n1", "CNI_NETNS_OVERRIDE=1"}, extra...)
	}
	tests := []struct {
		name     string
		plugin   string
		build    string
		env      []string
		stdin    string // "": conf
		declined string // substring; "" = served
		errCode  uint
	}{
		{name: "own build: served", plugin: "rdmanet-ipam", build: ipamBuild, env: env("ADD")},
		{name: "as whereabouts: served", plugin: "whereabouts", build: ipamBuild, env: env("ADD")},
		{name: "bad config: the plugin's error", plugin: "rdmanet-ipam", build: ipamBuild, env: env("ADD"), stdin: `{"cniVersion":"1.0.0","name":"n","ipam":{"type":"rdmanet-ipam","range":"bogus"}}`, errCode: types.ErrInternal},
		{name: "another package's build", plugin: "rdmanet-ipam", build: buildOf("sriov"), env: env("ADD"), declined: "package"},
		{name: "unknown plugin", plugin: "macvlan", build: ipamBuild, env: env("ADD"), declined: "not a plugin"},
		{name: "no build info of rdmanet", plugin: "rdmanet-ipam", build: "garbage", env: env("ADD"), declined: "main module"},
		{name: "another build setting", plugin: "rdmanet-ipam", build: strings.Replace(ipamBuild, "build\t-tags=", "build\t-tags=x,", 1), env: env("ADD"), declined: "-tags"},
	}
	if netops.TestHooks() {
		tests = append(tests, struct {
			name     string
			plugin   string
			build    string
			env      []string
			stdin    string
			declined string
			errCode  uint
		}{name: "exit failpoint: declined", plugin: "sriov", build: buildOf("sriov"), env: env("ADD", netops.EnvFault+"=sriov:ipam:exit"), declined: "failpoint"})
	}
	e := &Exec{Self: self(t)}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdin := conf
			if tc.stdin != "" {
				stdin = tc.stdin
			}
			out, declined, err := e.Serve(context.Background(), tc.plugin, tc.build, []byte(stdin), tc.env)
			switch {
			case tc.declined != "":
				if !strings.Contains(declined, tc.declined) || out != nil || err != nil {
					t.Fatalf("declined %q out %q err %v, want declined with %q", declined, out, err, tc.declined)
				}
			case declined != "":
				t.Fatalf("declined: %s", declined)
			case tc.errCode != 0:
				var te *types.Error
				if !errors.As(err, &te) || te.Code != tc.errCode || !strings.Contains(te.Msg, `field "range" = "bogus"`) {
					t.Fatalf("err %#v, want the plugin's code-%d error naming the bad range", err, tc.errCode)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				var res struct {
					IPs []struct{ Address string } `json:"ips"`
				}
				if json.Unmarshal(out, &res) != nil || len(res.IPs) != 1 || !strings.HasPrefix(res.IPs[0].Address, "10.9.0.") {
					t.Fatalf("result %s", out)
				}
			}
		})
	}
}
