package inproc

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/test/pluginbin"
)

// binDir holds one stamped build of the plugins and the daemon (the "self"
// the plugin files are compared with), plus upstream host-local.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rdmanet-inproc-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := pluginbin.BuildVCS(dir, pluginbin.SRIOV, pluginbin.RDMA, pluginbin.IPAM, pluginbin.MetaDaemon, pluginbin.HostLocal); err != nil {
		fmt.Fprintln(os.Stderr, "build plugins:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// self is the build info of the daemon built with the plugins.
func self(t testing.TB) *debug.BuildInfo {
	t.Helper()
	bi, err := buildinfo.ReadFile(filepath.Join(binDir, "rdmanet-daemon"))
	if err != nil {
		t.Fatal(err)
	}
	return bi
}

func copyFile(t testing.TB, from, to string, n int) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		b = b[:n]
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// otherModule builds a Go program of another main module.
func otherModule(t *testing.T, to string) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/othercni\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", to, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

func withSetting(bi *debug.BuildInfo, key, val string) *debug.BuildInfo {
	c := *bi
	c.Settings = nil
	found := false
	for _, s := range bi.Settings {
		if s.Key == key {
			s.Value, found = val, true
			if val == "" {
				continue
			}
		}
		c.Settings = append(c.Settings, s)
	}
	if !found && val != "" {
		c.Settings = append(c.Settings, debug.BuildSetting{Key: key, Value: val})
	}
	return &c
}

func TestDecide(t *testing.T) {
	our := func(name string) string { return filepath.Join(binDir, name) }
	tests := []struct {
		name   string
		file   string                        // binary name in a fresh dir
		setup  func(t *testing.T, to string) // creates the file
		self   func(*debug.BuildInfo) *debug.BuildInfo
		want   bool
		reason string // substring
	}{
		{name: "our sriov", file: "sriov", setup: func(t *testing.T, to string) { copyFile(t, our("sriov"), to, 0) }, want: true, reason: "same rdmanet build"},
		{name: "our rdma", file: "rdma", setup: func(t *testing.T, to string) { copyFile(t, our("rdma"), to, 0) }, want: true},
		{name: "our rdmanet-ipam", file: "rdmanet-ipam", setup: func(t *testing.T, to string) { copyFile(t, our("rdmanet-ipam"), to, 0) }, want: true},
		{name: "whereabouts symlink to our rdmanet-ipam", file: "whereabouts", setup: func(t *testing.T, to string) {
			if err := os.Symlink(our("rdmanet-ipam"), to); err != nil {
				t.Fatal(err)
			}
		}, want: true},
		{name: "whereabouts that is host-local", file: "whereabouts", setup: func(t *testing.T, to string) { copyFile(t, our("host-local"), to, 0) }, reason: "main module \"github.com/containernetworking/plugins\""},
		{name: "host-local installed as sriov", file: "sriov", setup: func(t *testing.T, to string) { copyFile(t, our("host-local"), to, 0) }, reason: "main module \"github.com/containernetworking/plugins\""},
		{name: "our rdma installed as sriov", file: "sriov", setup: func(t *testing.T, to string) { copyFile(t, our("rdma"), to, 0) }, reason: "cmd/rdma"},
		{name: "another module's Go binary as sriov", file: "sriov", setup: otherModule, reason: "main module"},
		{name: "shell script as sriov", file: "sriov", setup: func(t *testing.T, to string) {
			if err := os.WriteFile(to, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, reason: "no Go build info"},
		{name: "truncated copy of our rdma", file: "rdma", setup: func(t *testing.T, to string) { copyFile(t, our("rdma"), to, 4096) }, reason: "no Go build info"},
		{name: "missing file", file: "rdma", setup: func(*testing.T, string) {}, reason: "stat"},
		{name: "our sriov under an unregistered name", file: "macvlan", setup: func(t *testing.T, to string) { copyFile(t, our("sriov"), to, 0) }, reason: "not an rdmanet plugin"},
		{name: "daemon of another revision", file: "sriov", setup: func(t *testing.T, to string) { copyFile(t, our("sriov"), to, 0) },
			self: func(bi *debug.BuildInfo) *debug.BuildInfo { return withSetting(bi, "vcs.revision", "0123456789abcdef") }, reason: "another build"},
		{name: "daemon of the same revision, other modified flag", file: "sriov", setup: func(t *testing.T, to string) { copyFile(t, our("sriov"), to, 0) },
			self: func(bi *debug.BuildInfo) *debug.BuildInfo {
				flip := "true"
				for _, s := range bi.Settings {
					if s.Key == "vcs.modified" && s.Value == "true" {
						flip = "false"
					}
				}
				return withSetting(bi, "vcs.modified", flip)
			}, reason: "another build"},
		{name: "daemon built with other tags", file: "rdma", setup: func(t *testing.T, to string) { copyFile(t, our("rdma"), to, 0) },
			self: func(bi *debug.BuildInfo) *debug.BuildInfo { return withSetting(bi, "-tags", "other") }, reason: "-tags"},
		{name: "unstamped daemon", file: "sriov", setup: func(t *testing.T, to string) { copyFile(t, our("sriov"), to, 0) },
			self: func(bi *debug.BuildInfo) *debug.BuildInfo {
				b := withSetting(withSetting(withSetting(bi, "vcs.revision", ""), "vcs.modified", ""), "vcs.time", "")
				b.Main.Version = "(devel)"
				return b
			}, reason: "-buildvcs=false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			tc.setup(t, path)
			s := self(t)
			if tc.self != nil {
				s = tc.self(s)
			}
			e := &Exec{Self: s}
			got, reason := e.Decide(path)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Fatalf("Decide(%s) = %v, %q; want %v, reason containing %q", tc.name, got, reason, tc.want, tc.reason)
			}
		})
	}
}

// TestDecideFollowsTheFile: the cached decision is redone when the file at
// the path is replaced.
func TestDecideFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sriov")
	e := &Exec{Self: self(t)}
	steps := []struct {
		name  string
		setup func()
		want  bool
	}{
		{name: "script", setup: func() { _ = os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755) }, want: false},
		{name: "replaced by our sriov", setup: func() { copyFile(t, filepath.Join(binDir, "sriov"), path, 0) }, want: true},
		{name: "replaced by host-local", setup: func() { copyFile(t, filepath.Join(binDir, "host-local"), path, 0) }, want: false},
	}
	for i, s := range steps {
		s.setup()
		// a different mtime even within the clock's resolution
		mt := time.Now().Add(time.Duration(i) * time.Second)
		_ = os.Chtimes(path, mt, mt)
		if got, reason := e.Decide(path); got != s.want {
			t.Fatalf("%s: Decide = %v (%s), want %v", s.name, got, reason, s.want)
		}
	}
}

// environ is what libcni passes a plugin.
func environ(cmd string, kv ...string) []string {
	env := append(os.Environ(), "CNI_COMMAND="+cmd, "CNI_CONTAINERID=c0ffee0001", "CNI_NETNS=/var/run/netns/nope",
		"CNI_IFNAME=net1", "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=ai;K8S_POD_NAME=p", "CNI_PATH="+binDir)
	return append(env, kv...)
}

// TestSameAsBinary compares what the binary and the in-process run return
// for calls that stop before touching a node: environment and version
// errors, config errors (typed and untyped), VERSION, GC and STATUS.
// Results and the plugins' own errors must be identical; for the checks the
// CNI framework makes before the plugin runs (environment, config syntax,
// version), the in-process dispatcher words its own messages, so those
// (codeOnly) must fail with the same code.
func TestSameAsBinary(t *testing.T) {
	ipamDir := t.TempDir()
	ipamEnv := []string{"RDMANET_IPAM_STORE_PATH=" + ipamDir, "RDMANET_IPAM_STORE_TYPE=local", "RDMANET_IPAM_CONFIG=" + filepath.Join(ipamDir, "none.conf"), "NODENAME=n1"}
	sriovEnv := []string{"RDMANET_SYSFS_ROOT=" + t.TempDir(), "RDMANET_CNI_STATE_DIR=" + t.TempDir(), "RDMANET_NETOPS=record", "RDMANET_NETOPS_STATE=" + filepath.Join(t.TempDir(), "rec.json")}
	tests := []struct {
		name     string
		plugin   string
		env      []string
		stdin    string
		wantErr  bool
		codeOnly bool
	}{
		{name: "sriov VERSION", plugin: "sriov", env: environ("VERSION"), stdin: `{"cniVersion":"1.1.0"}`},
		{name: "rdma VERSION", plugin: "rdma", env: environ("VERSION"), stdin: `{"cniVersion":"1.1.0"}`},
		{name: "whereabouts VERSION", plugin: "whereabouts", env: environ("VERSION"), stdin: `{"cniVersion":"1.1.0"}`},
		{name: "sriov ADD without CNI_NETNS", plugin: "sriov", env: append(environ("ADD"), "CNI_NETNS="), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov"}`, wantErr: true, codeOnly: true},
		{name: "sriov bad ifname", plugin: "sriov", env: append(environ("ADD"), "CNI_IFNAME=a/b"), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov"}`, wantErr: true, codeOnly: true},
		{name: "sriov unknown command", plugin: "sriov", env: environ("FROB"), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov"}`, wantErr: true, codeOnly: true},
		{name: "sriov config without name", plugin: "sriov", env: environ("ADD"), stdin: `{"cniVersion":"1.0.0","type":"sriov"}`, wantErr: true, codeOnly: true},
		{name: "sriov config not JSON", plugin: "sriov", env: environ("ADD"), stdin: `{`, wantErr: true, codeOnly: true},
		{name: "sriov incompatible cniVersion", plugin: "sriov", env: environ("ADD"), stdin: `{"cniVersion":"0.2.0","name":"n","type":"sriov"}`, wantErr: true},
		{name: "sriov ADD without deviceID", plugin: "sriov", env: append(environ("ADD"), sriovEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov"}`, wantErr: true},
		{name: "sriov ADD with a VF that does not exist", plugin: "sriov", env: append(environ("ADD"), sriovEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov","deviceID":"0000:41:00.2"}`, wantErr: true},
		{name: "sriov netops misconfigured", plugin: "sriov", env: append(environ("ADD"), "RDMANET_NETOPS=bogus"), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov","deviceID":"0000:41:00.2"}`, wantErr: true},
		{name: "sriov CHECK at 0.3.1", plugin: "sriov", env: environ("CHECK"), stdin: `{"cniVersion":"0.3.1","name":"n","type":"sriov"}`, wantErr: true, codeOnly: true},
		{name: "sriov STATUS", plugin: "sriov", env: environ("STATUS"), stdin: `{"cniVersion":"1.1.0","name":"n","type":"sriov"}`},
		{name: "rdma GC", plugin: "rdma", env: environ("GC"), stdin: `{"cniVersion":"1.1.0","name":"n","type":"rdma"}`},
		{name: "rdma GC at 1.0.0", plugin: "rdma", env: environ("GC"), stdin: `{"cniVersion":"1.0.0","name":"n","type":"rdma"}`, wantErr: true, codeOnly: true},
		{name: "rdma DEL of nothing", plugin: "rdma", env: append(environ("DEL"), sriovEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"rdma"}`},
		{name: "whereabouts bad range", plugin: "whereabouts", env: append(environ("ADD"), ipamEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov","ipam":{"type":"whereabouts","range":"10.0.0.0/40"}}`, wantErr: true},
		{name: "whereabouts ADD", plugin: "whereabouts", env: append(environ("ADD"), ipamEnv...), stdin: `{"cniVersion":"0.3.1","name":"n","type":"sriov","ipam":{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}}`},
		{name: "whereabouts CHECK", plugin: "whereabouts", env: append(environ("CHECK"), ipamEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov","ipam":{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}}`},
		{name: "whereabouts DEL", plugin: "whereabouts", env: append(environ("DEL"), ipamEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov","ipam":{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}}`},
		{name: "whereabouts CHECK after DEL", plugin: "whereabouts", env: append(environ("CHECK"), ipamEnv...), stdin: `{"cniVersion":"1.0.0","name":"n","type":"sriov","ipam":{"type":"whereabouts","range":"10.60.0.0/16","exclude":["10.60.0.0/24"]}}`, wantErr: true},
	}
	e := &Exec{Self: self(t)}
	raw := &invoke.RawExec{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(binDir, tc.plugin)
			if ok, why := e.Decide(path); !ok {
				t.Fatalf("%s runs as a process: %s", path, why)
			}
			// the in-process call first: ADD/DEL pairs of the IPAM then
			// run twice each, which they must tolerate (idempotent)
			gotOut, gotErr := e.ExecPlugin(context.Background(), path, []byte(tc.stdin), tc.env)
			wantOut, wantErr := raw.ExecPlugin(context.Background(), path, []byte(tc.stdin), tc.env)
			if (wantErr != nil) != tc.wantErr {
				t.Fatalf("the binary returned %v, want error %v", wantErr, tc.wantErr)
			}
			if string(gotOut) != string(wantOut) {
				t.Errorf("stdout in-process:\n%s\nbinary:\n%s", gotOut, wantOut)
			}
			if wantErr == nil {
				if gotErr != nil {
					t.Fatalf("in-process error %v, the binary none", gotErr)
				}
				return
			}
			var g, w *types.Error
			if !errors.As(gotErr, &g) || !errors.As(wantErr, &w) {
				t.Fatalf("errors are not *types.Error: in-process %T %v, binary %T %v", gotErr, gotErr, wantErr, wantErr)
			}
			if tc.codeOnly && g.Code == w.Code && g.Msg != "" {
				return
			}
			if *g != *w {
				t.Fatalf("in-process error %+v\nbinary error     %+v", *g, *w)
			}
		})
	}
}

// TestRecover: a panic or an untyped error of an in-process plugin comes
// back as the *types.Error a failing process gives.
func TestRecover(t *testing.T) {
	stdin := []byte(`{"cniVersion":"1.0.0","name":"n","type":"sriov"}`)
	tests := []struct {
		name    string
		run     RunFunc
		env     []string
		wantMsg string // substring; "" = must not contain "panicked"
		code    uint
	}{
		{name: "panic", run: func(context.Context, *Exec, string, *skel.CmdArgs, []string) ([]byte, error) { panic("boom") },
			env: environ("ADD"), wantMsg: "CNI plugin sriov (in-process) panicked: boom", code: types.ErrInternal},
		{name: "nil map write", run: func(context.Context, *Exec, string, *skel.CmdArgs, []string) ([]byte, error) {
			var m map[string]int
			m["x"] = 1
			return nil, nil
		}, env: environ("DEL"), wantMsg: "CNI plugin sriov (in-process) panicked: assignment to entry in nil map", code: types.ErrInternal},
		{name: "untyped error", run: func(context.Context, *Exec, string, *skel.CmdArgs, []string) ([]byte, error) {
			return nil, fmt.Errorf("wrapped: %w", os.ErrNotExist)
		}, env: environ("ADD"), wantMsg: "wrapped: file does not exist", code: types.ErrInternal},
		{name: "typed error", run: func(context.Context, *Exec, string, *skel.CmdArgs, []string) ([]byte, error) {
			return nil, fmt.Errorf("ctx: %w", types.NewError(types.ErrTryAgainLater, "busy", "d"))
		}, env: environ("ADD"), wantMsg: "busy", code: types.ErrTryAgainLater},
		{name: "exit failpoint runs the binary", run: func(context.Context, *Exec, string, *skel.CmdArgs, []string) ([]byte, error) { panic("ran in-process") },
			env: environ("ADD", "RDMANET_CNI_FAULT=sriov:cache:exit", "RDMANET_SYSFS_ROOT="+t.TempDir()), code: errNotPanicked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &Exec{Self: self(t), Plugins: map[string]Plugin{"sriov": {Package: PkgSRIOV, Versions: Default()["sriov"].Versions, Fault: "sriov", Run: tc.run}}}
			_, err := e.ExecPlugin(context.Background(), filepath.Join(binDir, "sriov"), stdin, tc.env)
			var te *types.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %T %v, want *types.Error", err, err)
			}
			if tc.code == errNotPanicked {
				if strings.Contains(te.Msg, "panicked") {
					t.Fatalf("ran in-process: %v", te)
				}
				return
			}
			if te.Code != tc.code || !strings.Contains(te.Msg, tc.wantMsg) {
				t.Fatalf("error %+v, want code %d and msg containing %q", *te, tc.code, tc.wantMsg)
			}
		})
	}
}

// errNotPanicked marks a TestRecover case that must have run as a process.
const errNotPanicked = 1000
