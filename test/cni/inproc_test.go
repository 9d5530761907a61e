package cni_test

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/daemon/inproc"
	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// stampedDir is one VCS-stamped build of rdmanet's plugins (binDir may be
// unstamped under GOFLAGS=-buildvcs=false, which never runs in-process).
var (
	stampedOnce sync.Once
	stampedDir  string
	stampedErr  error
)

func stampedBin(t testing.TB) string {
	t.Helper()
	stampedOnce.Do(func() {
		stampedDir = filepath.Join(binDir, "stamped")
		stampedErr = pluginbin.BuildVCS(stampedDir, pluginbin.SRIOV, pluginbin.RDMA, pluginbin.IPAM, pluginbin.MetaDaemon)
	})
	if stampedErr != nil {
		t.Fatal(stampedErr)
	}
	return stampedDir
}

// inprocExec is the daemon's Exec with the stamped build as "self"; it
// fails the test unless the seed chain's plugins run in-process.
func inprocExec(t testing.TB, dir string) *inproc.Exec {
	t.Helper()
	bi, err := buildinfo.ReadFile(filepath.Join(dir, "sriov"))
	if err != nil {
		t.Fatal(err)
	}
	e := &inproc.Exec{Self: bi}
	for _, p := range []string{"sriov", "rdma", "whereabouts"} {
		if ok, why := e.Decide(filepath.Join(dir, p)); !ok {
			t.Fatalf("%s would run as a process: %s", p, why)
		}
	}
	return e
}

// effects is what one call did to the node.
type effects struct {
	Result string
	Err    *types.Error
	Ops    []string          // netops recorder commands
	State  map[string]string // plugin state files (content)
	IPs    map[string][]string
	Pod    []string // pod links and addresses
}

func (n *node) effects(t testing.TB, pod ns.NetNS, logFrom int, res types.Result, err error) effects {
	t.Helper()
	e := effects{State: map[string]string{}, IPs: n.allocations(t)}
	if res != nil {
		b, _ := json.Marshal(res)
		e.Result = string(b)
	}
	if err != nil {
		if !errors.As(err, &e.Err) {
			t.Fatalf("error %T %v is not a *types.Error", err, err)
		}
	}
	log, lerr := n.rec.Log()
	if lerr != nil {
		t.Fatal(lerr)
	}
	// the host netns is recorded as the calling thread's /proc path:
	// another pid and tid in-process, the same namespace
	for _, l := range log[logFrom:] {
		e.Ops = append(e.Ops, threadNS.ReplaceAllString(l, "/proc/<pid>/task/<tid>/ns/net"))
	}
	for _, f := range n.stateFiles(t) {
		b, _ := os.ReadFile(filepath.Join(n.stateDir, f))
		e.State[f] = string(b)
	}
	for _, l := range netnsutil.Links(t, pod) {
		if li, ok := netnsutil.Link(t, pod, l); ok {
			e.Pod = append(e.Pod, fmt.Sprintf("%s mac=%s mtu=%d up=%v addrs=%v", l, li.MAC, li.MTU, li.Up, netnsutil.Addrs(t, pod, l)))
		}
	}
	sort.Strings(e.Pod)
	return e
}

var threadNS = regexp.MustCompile(`/proc/[0-9]+/task/[0-9]+/ns/net`)

func (n *node) logLen(t testing.TB) int {
	t.Helper()
	log, err := n.rec.Log()
	if err != nil {
		t.Fatal(err)
	}
	return len(log)
}

func diff(t *testing.T, what string, got, want effects) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("%s in-process:\n%s\nexec'd binaries:\n%s", what, g, w)
	}
}

// TestInProcessSeedChain runs the seed chain's ADD, CHECK, DEL and DEL
// again through libcni, first with the exec'd binaries, then with the
// daemon's in-process Exec on the same VF and pod, and compares the result
// JSON and every effect on the node after each step.
func TestInProcessSeedChain(t *testing.T) {
	for _, v := range []string{"0.3.1", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			dir := stampedBin(t)
			n := newNode(t, 2)
			pod := netnsutil.NewNS(t)
			const i = 1
			l := confList(t, seedNAD, v, vfBDF(i))
			r := rt(i, pod)
			runners := []*libcni.CNIConfig{
				libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(n.root, "cache-exec"), nil),
				libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(n.root, "cache-inproc"), inprocExec(t, dir)),
			}
			steps := []string{"ADD", "CHECK", "DEL", "DEL again"}
			var got [2][]effects
			for k, c := range runners {
				for _, s := range steps {
					from := n.logLen(t)
					var res types.Result
					var err error
					_ = n.inHost(func() error {
						switch s {
						case "ADD":
							res, err = c.AddNetworkList(context.Background(), l, r)
						case "CHECK":
							if v != "0.3.1" {
								err = c.CheckNetworkList(context.Background(), l, r)
							}
						default:
							err = c.DelNetworkList(context.Background(), l, r)
						}
						return nil
					})
					if err != nil {
						t.Fatalf("%s (%s): %v", s, map[int]string{0: "exec", 1: "in-process"}[k], err)
					}
					got[k] = append(got[k], n.effects(t, pod, from, res, err))
				}
			}
			for j, s := range steps {
				diff(t, s, got[1][j], got[0][j])
			}
			if len(got[1][0].Ops) == 0 || got[1][0].Result == "" {
				t.Errorf("in-process ADD recorded no operations or no result: %+v", got[1][0])
			}
			n.assertRestored(t, i, containerID(i))
		})
	}
}

// TestInProcessErrors: a failing plugin gives the same *types.Error (code,
// message, details) and leaves the node the same in-process as exec'd.
func TestInProcessErrors(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		other bool // ADD a second container onto the VF the first holds
	}{
		{name: "VF held by another container (untyped error: 999)", other: true},
		{name: "sriov fault after IPAM, rolled back", env: map[string]string{netops.EnvFault: "sriov:ipam"}},
		{name: "rdma fault after its move, rolled back", env: map[string]string{netops.EnvFault: "rdma:move"}},
		{name: "bad deviceID (typed config error)", env: map[string]string{"RDMANET_SYSFS_ROOT": "/nonexistent"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := stampedBin(t)
			n := newNode(t, 2)
			const i = 0
			l := confList(t, seedNAD, "1.0.0", vfBDF(i))
			holder := netnsutil.NewNS(t)
			execCNI := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(n.root, "cache-exec"), nil)
			if tc.other {
				if err := n.inHost(func() error { _, err := execCNI.AddNetworkList(context.Background(), l, rt(i, holder)); return err }); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			runners := []*libcni.CNIConfig{execCNI,
				libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(n.root, "cache-inproc"), inprocExec(t, dir))}
			pod := netnsutil.NewNS(t)
			r := rt(7, pod)
			var got [2]effects
			for k, c := range runners {
				from := n.logLen(t)
				var res types.Result
				var err error
				_ = n.inHost(func() error { res, err = c.AddNetworkList(context.Background(), l, r); return nil })
				if err == nil {
					t.Fatalf("ADD (%d) succeeded", k)
				}
				got[k] = n.effects(t, pod, from, res, err)
				// the runtime's DEL after a failed ADD
				if err := n.inHost(func() error { return c.DelNetworkList(context.Background(), l, r) }); err != nil {
					t.Fatalf("DEL after the failed ADD (%d): %v", k, err)
				}
			}
			diff(t, "failed ADD", got[1], got[0])
			t.Logf("error: %+v", got[1].Err)
		})
	}
}
