package nsguard

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/test/netnsutil"
)

func threadNS(t *testing.T) string {
	t.Helper()
	l, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestPanicReachesCaller: a panic inside a netns callback (run by ns.Do on
// a goroutine of its own) is raised again on the caller's goroutine, with
// the value and the callback's stack, after the thread left the namespace;
// an error or a normal return pass through (defect 12).
func TestPanicReachesCaller(t *testing.T) {
	netnsutil.RequireRoot(t)
	target := netnsutil.NewNS(t)
	tests := []struct {
		name      string
		run       func(p ns.NetNS) error
		wantPanic any
		wantErr   error
	}{
		{name: "panic", run: func(ns.NetNS) error { panic("boom") }, wantPanic: "boom"},
		{name: "runtime error", run: func(ns.NetNS) error { var m map[string]int; m["x"] = 1; return nil }, wantPanic: "assignment to entry in nil map"},
		{name: "nested Do", run: func(ns.NetNS) error {
			return Do(target, func(ns.NetNS) error { panic("inner") })
		}, wantPanic: "inner"},
		{name: "error", run: func(ns.NetNS) error { return errBoom }, wantErr: errBoom},
		{name: "nil", run: func(ns.NetNS) error { return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := threadNS(t)
			var got any
			var err error
			func() {
				defer func() { got = recover() }()
				err = Do(target, tc.run)
			}()
			if tc.wantPanic == nil {
				if got != nil || !errors.Is(err, tc.wantErr) {
					t.Fatalf("panic %v err %v, want err %v", got, err, tc.wantErr)
				}
				return
			}
			p, ok := got.(*Panic)
			if !ok {
				t.Fatalf("recovered %#v, want a *Panic", got)
			}
			if !strings.Contains(p.Error(), tc.wantPanic.(string)) || !strings.Contains(string(p.Stack), "nsguard.TestPanicReachesCaller") {
				t.Fatalf("panic %q with stack\n%s", p.Error(), p.Stack)
			}
			if after := threadNS(t); after != before {
				t.Fatalf("the caller's thread is in %s after the panic, was in %s", after, before)
			}
		})
	}
	t.Run("GetNS and WithNetNSPath are guarded", func(t *testing.T) {
		n, err := GetNS(target.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		for name, f := range map[string]func() error{
			"GetNS":         func() error { return n.Do(func(ns.NetNS) error { panic("x") }) },
			"WithNetNSPath": func() error { return WithNetNSPath(target.Path(), func(ns.NetNS) error { panic("x") }) },
		} {
			func() {
				defer func() {
					if _, ok := recover().(*Panic); !ok {
						t.Errorf("%s: the panic did not come back to the caller as a *Panic", name)
					}
				}()
				_ = f()
			}()
		}
	})
}

var errBoom = errors.New("boom")

// unguarded are the calls whose NetNS runs callbacks unguarded.
var unguarded = map[string]bool{"GetNS": true, "GetCurrentNS": true, "WithNetNSPath": true, "TempNetNS": true, "NewNS": true}

// TestDaemonCodeUsesGuardedNetns: no package the daemon links opens a
// network namespace without nsguard, so a panic in any netns callback it
// runs in-process (sriov, rdma, their shared DEL step, the meta plugin's
// default route) comes back to the request's recover instead of killing
// the daemon (defect 12).
func TestDaemonCodeUsesGuardedNetns(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}{{end}}", "github.com/rdmanet/rdmanet/cmd/rdmanet-daemon").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || !strings.HasPrefix(f[0], "github.com/rdmanet/rdmanet/") || f[0] == "github.com/rdmanet/rdmanet/internal/daemon/inproc/nsguard" {
			continue
		}
		for _, name := range strings.Split(f[2], ",") {
			path := filepath.Join(f[1], name)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			local := ""
			for _, imp := range file.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/containernetworking/plugins/pkg/ns" || p == "github.com/containernetworking/cni/pkg/ns" {
					local = "ns"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && unguarded[sel.Sel.Name] {
					t.Errorf("%s: %s.%s: use nsguard (GetNS, GetCurrentNS, WithNetNSPath or Guard): a panic in its callbacks would kill the daemon", path, local, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("no files checked")
	}
}
