package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"

	"sigs.k8s.io/yaml"

	"github.com/rdmanet/rdmanet/internal/version"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

// projectedToken stands for the pod's projected ServiceAccount token (kubelet writes no newline; one is accepted).
const projectedToken = "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3Nzc2NDA0MDB9.c2ln\n"

// Fake Go binaries with the build info the installer inspects: built from
// throwaway modules whose module and package paths are rdmanet's (or
// Whereabouts'), so their Go build info says what a real build's says.
var (
	fakeOnce sync.Once
	fakeDir  string
	fakeErr  error
)

// fakeBinary returns a built fake: "rdmanet-ipam", "rdmanet" (rdmanet's
// module) or "whereabouts" (the Whereabouts project's).
func fakeBinary(t *testing.T, name string) string {
	t.Helper()
	fakeOnce.Do(func() {
		fakeDir, fakeErr = os.MkdirTemp("", "rdmanet-install-fakes-")
		if fakeErr != nil {
			return
		}
		for _, f := range []struct{ module, pkg, out string }{
			{version.Module, "cmd/rdmanet-ipam", "rdmanet-ipam"},
			{version.Module, "cmd/rdmanet", "rdmanet"},
			{"github.com/k8snetworkplumbingwg/whereabouts", "cmd/whereabouts", "whereabouts"},
		} {
			mod := filepath.Join(fakeDir, "src-"+f.out)
			main := fmt.Sprintf("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(%q) }\n", "fake "+f.out)
			if fakeErr = os.MkdirAll(filepath.Join(mod, f.pkg), 0o755); fakeErr != nil {
				return
			}
			if fakeErr = os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module "+f.module+"\n\ngo 1.22\n"), 0o644); fakeErr != nil {
				return
			}
			if fakeErr = os.WriteFile(filepath.Join(mod, f.pkg, "main.go"), []byte(main), 0o644); fakeErr != nil {
				return
			}
			cmd := exec.Command("go", "build", "-o", filepath.Join(fakeDir, f.out), "./"+f.pkg)
			cmd.Dir = mod
			cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				fakeErr = fmt.Errorf("build fake %s: %v\n%s", f.out, err, out)
				return
			}
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return filepath.Join(fakeDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeDir != "" {
		os.RemoveAll(fakeDir)
	}
	os.Exit(code)
}

// node is a temporary node: an image source dir, the host's CNI dirs, the
// mounted ConfigMap and the pod's projected token volume.
type node struct {
	root             string
	src, bin, conf   string
	config, tokens   string
	log              *bytes.Buffer
	reportedVersions map[string]string
}

func newNode(t *testing.T) *node {
	t.Helper()
	root := t.TempDir()
	n := &node{root: root, src: filepath.Join(root, "image/opt/rdmanet/bin"), bin: filepath.Join(root, "host/opt/cni/bin"),
		conf: filepath.Join(root, "etc/cni/net.d"), config: filepath.Join(root, "etc/rdmanet/node"), tokens: filepath.Join(root, "secrets"),
		log: &bytes.Buffer{}, reportedVersions: map[string]string{}}
	for _, b := range DefaultBinaries {
		switch b {
		case "rdmanet", "rdmanet-ipam":
			copyFile(t, fakeBinary(t, b), filepath.Join(n.src, b), 0o755)
		default:
			writeFile(t, filepath.Join(n.src, b), "binary "+b+" v2", 0o755)
		}
	}
	writeFile(t, filepath.Join(n.config, MetaConf), `{"cniVersion":"0.3.1","name":"rdmanet","type":"rdmanet"}`, 0o644)
	writeFile(t, filepath.Join(n.config, IPAMConf), `{"store":{"type":"kubernetes"}}`, 0o644)
	// the projected volume: the pod's token and kube-root-ca.crt
	writeFile(t, filepath.Join(n.tokens, "token"), projectedToken, 0o400)
	writeFile(t, filepath.Join(n.tokens, "ca.crt"), testCA, 0o400)
	return n
}

func (n *node) options(mut ...func(*Options)) Options {
	o := Options{SrcDir: n.src, CNIBinDir: n.bin, CNIConfDir: n.conf, ConfigDir: n.config, TokenDir: n.tokens,
		Binaries: slices.Clone(DefaultBinaries), AsWhereabouts: WhereaboutsAuto, APIServer: "https://10.96.0.1:443",
		Version: "0.2.0", Installer: "rdmanet-install 0.2.0 (test)",
		Log: slog.New(slog.NewTextHandler(n.log, nil)),
		ReportedVersion: func(_ context.Context, path string) (string, error) {
			if v, ok := n.reportedVersions[path]; ok {
				return v, nil
			}
			return "", errors.New("no version")
		}}
	for _, m := range mut {
		m(&o)
	}
	return o
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b), mode)
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree lists every file and directory under dir (relative, with mode), so
// a test can compare a node before and after.
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v", rel, info.Mode()))
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func inode(t testing.TB, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// wantInstalled checks a complete install on n.
func wantInstalled(t *testing.T, n *node, whereabouts bool) {
	t.Helper()
	for _, b := range DefaultBinaries {
		p := filepath.Join(n.bin, b)
		if readFile(t, p) != readFile(t, filepath.Join(n.src, b)) {
			t.Errorf("%s differs from the image's", p)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o755 {
			t.Errorf("%s mode %v", p, st.Mode())
		}
	}
	wb := filepath.Join(n.bin, Whereabouts)
	if whereabouts && readFile(t, wb) != readFile(t, filepath.Join(n.src, IPAMBinary)) {
		t.Errorf("%s is not rdmanet-ipam", wb)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{"rdmanet.d", 0o700 | fs.ModeDir}, {"rdmanet-ipam.d", 0o700 | fs.ModeDir},
		{"rdmanet.d/token", 0o600}, {"rdmanet.d/ca.crt", 0o644}, {"rdmanet.d/rdmanet.kubeconfig", 0o600},
		{"rdmanet-ipam.d/rdmanet-ipam.kubeconfig", 0o600},
		{"rdmanet-ipam.d/rdmanet-ipam.conf", 0o644}, {"00-rdmanet.conf", 0o644}, {"rdmanet.d/install.json", 0o600},
	} {
		st, err := os.Stat(filepath.Join(n.conf, f.path))
		if err != nil || st.Mode() != f.mode {
			t.Errorf("%s: %v %v, want mode %v", f.path, st, err, f.mode)
		}
	}
	if got := readFile(t, filepath.Join(n.conf, MetaConf)); got != readFile(t, filepath.Join(n.config, MetaConf)) {
		t.Errorf("00-rdmanet.conf = %q", got)
	}
	for _, id := range Identities {
		var kc struct {
			Clusters []struct {
				Cluster map[string]string `json:"cluster"`
			} `json:"clusters"`
			Users []struct {
				Name string            `json:"name"`
				User map[string]string `json:"user"`
			} `json:"users"`
			CurrentContext string `json:"current-context"`
		}
		p := filepath.Join(n.conf, id.Dir, id.Name+".kubeconfig")
		if err := yaml.Unmarshal([]byte(readFile(t, p)), &kc); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		// every identity is the node's: one token file, one CA
		if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster["server"] != "https://10.96.0.1:443" || kc.Clusters[0].Cluster["certificate-authority"] != filepath.Join(n.conf, HostCAFile) ||
			len(kc.Users) != 1 || kc.Users[0].User["tokenFile"] != filepath.Join(n.conf, HostTokenFile) || kc.CurrentContext != id.Name {
			t.Errorf("%s: %+v", p, kc)
		}
	}
	if got := readFile(t, filepath.Join(n.conf, HostTokenFile)); got != strings.TrimSpace(projectedToken) {
		t.Errorf("%s = %q, want the projected token", HostTokenFile, got)
	}
	for _, gone := range []string{"rdmanet-ipam.d/token", "rdmanet-ipam.d/ca.crt"} {
		if _, err := os.Lstat(filepath.Join(n.conf, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want no such file (one token file per node)", gone, err)
		}
	}
	noTemps(t, n)
}

func noTemps(t *testing.T, n *node) {
	t.Helper()
	for _, f := range append(tree(t, n.bin), tree(t, n.conf)...) {
		if strings.Contains(f, ".tmp") || strings.Contains(f, legacyTmpTail) {
			t.Errorf("temporary file left: %s", f)
		}
	}
}

func TestInstall(t *testing.T) {
	tests := []struct {
		name string
		// before prepares the node (an earlier install, other files).
		before func(t *testing.T, n *node)
		opts   func(*Options)
		// wantErr is the error the install must wrap; nil: success.
		wantErr     error
		errContains string
		whereabouts string // report's Whereabouts on success
		check       func(t *testing.T, n *node, rep *Report)
	}{
		{
			name:        "fresh install",
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if rep.Count("installed") != len(DefaultBinaries)+1+4+2 || rep.Count("updated")+rep.Count("unchanged") != 0 {
					t.Errorf("actions %+v", rep.Actions)
				}
				m, err := readManifest(filepath.Join(n.conf, MetaDir, ManifestName))
				if err != nil || m.Version != "0.2.0" || len(m.Files) != len(DefaultBinaries)+1+4+2 {
					t.Fatalf("manifest %+v %v", m, err)
				}
				for _, e := range m.Files {
					if len(e.Also) != 0 || e.SHA256 == "" {
						t.Errorf("final manifest entry %+v", e)
					}
				}
				if !strings.Contains(n.log.String(), "no whereabouts binary is there") {
					t.Errorf("log does not say why whereabouts was installed:\n%s", n.log)
				}
			},
		},
		{
			name: "reinstall same version leaves identical files alone",
			before: func(t *testing.T, n *node) {
				if _, err := Install(context.Background(), n.options()); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(n.root, "inode"), fmt.Sprint(inode(t, filepath.Join(n.bin, "sriov"))), 0o644)
			},
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if rep.InstalledVersion != "0.2.0" || rep.Count("unchanged") != len(rep.Actions) {
					t.Errorf("installed %q, actions %+v", rep.InstalledVersion, rep.Actions)
				}
				if fmt.Sprint(inode(t, filepath.Join(n.bin, "sriov"))) != readFile(t, filepath.Join(n.root, "inode")) {
					t.Error("an identical binary was rewritten")
				}
			},
		},
		{
			name: "upgrade replaces by rename: a running plugin keeps its file",
			before: func(t *testing.T, n *node) {
				writeFile(t, filepath.Join(n.src, "sriov"), "binary sriov v1", 0o755)
				if _, err := Install(context.Background(), n.options(func(o *Options) { o.Version = "0.1.0" })); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(n.src, "sriov"), "binary sriov v2", 0o755)
				// the "running plugin": an open file of the old binary
				f, err := os.Open(filepath.Join(n.bin, "sriov"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					b, err := io.ReadAll(f)
					f.Close()
					if err != nil || string(b) != "binary sriov v1" {
						t.Errorf("the running plugin's file now reads %q, %v", b, err)
					}
				})
			},
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if rep.InstalledVersion != "0.1.0" || !slices.Contains(rep.Actions, Action{Path: filepath.Join(n.bin, "sriov"), Did: "updated"}) {
					t.Errorf("installed %q, actions %+v", rep.InstalledVersion, rep.Actions)
				}
			},
		},
		{
			name: "newer already installed: refused, nothing changed",
			before: func(t *testing.T, n *node) {
				if _, err := Install(context.Background(), n.options(func(o *Options) { o.Version = "0.3.0" })); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(n.src, "sriov"), "binary sriov older", 0o755)
				writeFile(t, filepath.Join(n.root, "tree"), strings.Join(append(tree(t, n.bin), tree(t, n.conf)...), "\n"), 0o644)
			},
			wantErr:     ErrNewerInstalled,
			errContains: "--force",
			check: func(t *testing.T, n *node, rep *Report) {
				if got := strings.Join(append(tree(t, n.bin), tree(t, n.conf)...), "\n"); got != readFile(t, filepath.Join(n.root, "tree")) {
					t.Errorf("files changed by a refused install:\n%s", got)
				}
				if readFile(t, filepath.Join(n.bin, "sriov")) != "binary sriov v2" {
					t.Error("sriov was downgraded")
				}
			},
		},
		{
			name: "newer already installed, --force downgrades",
			before: func(t *testing.T, n *node) {
				if _, err := Install(context.Background(), n.options(func(o *Options) { o.Version = "0.3.0" })); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(n.src, "sriov"), "binary sriov older", 0o755)
			},
			opts:        func(o *Options) { o.Force = true },
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if !strings.Contains(n.log.String(), "downgrading") {
					t.Errorf("log does not say it downgraded:\n%s", n.log)
				}
			},
		},
		{
			name: "newer rdmanet without a manifest: its reported version counts",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "rdmanet"), filepath.Join(n.bin, "rdmanet"), 0o755)
				n.reportedVersions[filepath.Join(n.bin, "rdmanet")] = "1.0.0"
			},
			wantErr: ErrNewerInstalled,
			check: func(t *testing.T, n *node, rep *Report) {
				if _, err := os.Stat(filepath.Join(n.conf, MetaConf)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("00-rdmanet.conf written by a refused install: %v", err)
				}
			},
		},
		{
			name: "an install.sh-era rdmanet without a version is upgraded",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "rdmanet"), filepath.Join(n.bin, "rdmanet"), 0o755)
				writeFile(t, filepath.Join(n.bin, "sriov.rdmanet-tmp"), "half a binary", 0o644) // install.sh killed mid-copy
			},
			whereabouts: "installed",
			check:       func(t *testing.T, n *node, rep *Report) { wantInstalled(t, n, true) },
		},
		{
			name: "foreign whereabouts present: left untouched",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "whereabouts"), filepath.Join(n.bin, Whereabouts), 0o755)
			},
			whereabouts: "skipped (another whereabouts is installed)",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, false)
				if readFile(t, filepath.Join(n.bin, Whereabouts)) != readFile(t, fakeBinary(t, "whereabouts")) {
					t.Error("the foreign whereabouts was overwritten")
				}
				if !strings.Contains(n.log.String(), "not installing rdmanet-ipam as whereabouts") || !strings.Contains(n.log.String(), "k8snetworkplumbingwg/whereabouts") {
					t.Errorf("log does not name the foreign whereabouts:\n%s", n.log)
				}
			},
		},
		{
			name: "foreign whereabouts present, true without --force: refused",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "whereabouts"), filepath.Join(n.bin, Whereabouts), 0o755)
			},
			opts:        func(o *Options) { o.AsWhereabouts = WhereaboutsTrue },
			wantErr:     ErrForeignWhereabouts,
			errContains: "Migrating from Whereabouts",
			check: func(t *testing.T, n *node, rep *Report) {
				if readFile(t, filepath.Join(n.bin, Whereabouts)) != readFile(t, fakeBinary(t, "whereabouts")) {
					t.Error("the foreign whereabouts was overwritten")
				}
			},
		},
		{
			name: "foreign whereabouts present, true with --force: replaced, said so",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "whereabouts"), filepath.Join(n.bin, Whereabouts), 0o755)
			},
			opts:        func(o *Options) { o.AsWhereabouts, o.Force = WhereaboutsTrue, true },
			whereabouts: "installed (replaced another whereabouts)",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if !strings.Contains(n.log.String(), "replacing another project's whereabouts") {
					t.Errorf("log:\n%s", n.log)
				}
			},
		},
		{
			name: "own whereabouts present (an rdmanet-ipam build): updated",
			before: func(t *testing.T, n *node) {
				b := readFile(t, fakeBinary(t, "rdmanet-ipam"))
				writeFile(t, filepath.Join(n.bin, Whereabouts), b+"\x00older build", 0o755) // still rdmanet-ipam by build info
			},
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if !strings.Contains(n.log.String(), "the whereabouts there is rdmanet's own") {
					t.Errorf("log:\n%s", n.log)
				}
			},
		},
		{
			name: "false removes the whereabouts an earlier install put there",
			before: func(t *testing.T, n *node) {
				if _, err := Install(context.Background(), n.options()); err != nil {
					t.Fatal(err)
				}
			},
			opts:        func(o *Options) { o.AsWhereabouts = WhereaboutsFalse },
			whereabouts: "not requested",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, false)
				if _, err := os.Stat(filepath.Join(n.bin, Whereabouts)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("whereabouts still there: %v", err)
				}
			},
		},
		{
			name: "false leaves a whereabouts that no rdmanet install wrote",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "whereabouts"), filepath.Join(n.bin, Whereabouts), 0o755)
			},
			opts:        func(o *Options) { o.AsWhereabouts = WhereaboutsFalse },
			whereabouts: "not requested",
			check: func(t *testing.T, n *node, rep *Report) {
				if readFile(t, filepath.Join(n.bin, Whereabouts)) != readFile(t, fakeBinary(t, "whereabouts")) {
					t.Error("the foreign whereabouts was touched")
				}
			},
		},
		{
			name: "projected token missing: the error names the file and the volume",
			before: func(t *testing.T, n *node) {
				if err := os.Remove(filepath.Join(n.tokens, "token")); err != nil {
					t.Fatal(err)
				}
			},
			errContains: "token: no such file or directory; fix: mount the DaemonSet's projected volume node-token",
			check: func(t *testing.T, n *node, rep *Report) {
				if entries, _ := os.ReadDir(n.bin); len(entries) != 0 {
					t.Errorf("files written before every input was checked: %v", entries)
				}
			},
		},
		{
			name: "broken ConfigMap JSON: the error names the file and the key",
			before: func(t *testing.T, n *node) {
				writeFile(t, filepath.Join(n.config, MetaConf), `{"type": "rdmanet",`, 0o644)
			},
			errContains: "key 00-rdmanet.conf of the ConfigMap rdmanet-node-config",
		},
		{
			name:        "GUID pool config installed where ib-sriov reads it without the daemon's environment",
			before:      func(t *testing.T, n *node) { writeFile(t, n.guidPool(), guidPoolJSON, 0o644) },
			opts:        withGUIDPool,
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				p := filepath.Join(n.conf, IPAMDir, GUIDPoolConf)
				if got := readFile(t, p); got != guidPoolJSON {
					t.Errorf("%s = %q, want the ConfigMap's", p, got)
				}
				if st, _ := os.Stat(p); st.Mode() != 0o644 {
					t.Errorf("%s mode %v", p, st.Mode())
				}
				if !slices.Contains(rep.Actions, Action{Path: p, Did: "installed"}) {
					t.Errorf("actions %+v", rep.Actions)
				}
			},
		},
		{
			name: "GUID pool config removed when the flag is dropped (the component taken out)",
			before: func(t *testing.T, n *node) {
				writeFile(t, n.guidPool(), guidPoolJSON, 0o644)
				if _, err := Install(context.Background(), n.options(withGUIDPool)); err != nil {
					t.Fatal(err)
				}
			},
			whereabouts: "installed",
			check: func(t *testing.T, n *node, rep *Report) {
				wantInstalled(t, n, true)
				if _, err := os.Lstat(filepath.Join(n.conf, IPAMDir, GUIDPoolConf)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("guid-pool.json: %v, want removed", err)
				}
			},
		},
		{
			name:        "broken GUID pool JSON: refused before anything is written, naming the flag and the ConfigMap key",
			before:      func(t *testing.T, n *node) { writeFile(t, n.guidPool(), `{"ranges": [`, 0o644) },
			opts:        withGUIDPool,
			errContains: "is not valid JSON; fix: correct the key guid-pool.json of the ConfigMap rdmanet-guid-pool",
			check: func(t *testing.T, n *node, rep *Report) {
				if entries, _ := os.ReadDir(n.bin); len(entries) != 0 {
					t.Errorf("files written before every input was checked: %v", entries)
				}
			},
		},
		{
			name:        "GUID pool config missing: the error says what to mount",
			opts:        withGUIDPool, // and no file there
			errContains: "mount the ConfigMap rdmanet-guid-pool",
		},
		{
			name:        "binary missing from the image",
			before:      func(t *testing.T, n *node) { os.Remove(filepath.Join(n.src, "rdma")) },
			errContains: "binary rdma in ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			if tc.before != nil {
				tc.before(t, n)
			}
			n.log.Reset()
			opts := []func(*Options){}
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			rep, err := Install(context.Background(), n.options(opts...))
			switch {
			case tc.wantErr == nil && tc.errContains == "":
				if err != nil {
					t.Fatalf("Install: %v\nlog:\n%s", err, n.log)
				}
				if rep.Whereabouts != tc.whereabouts {
					t.Errorf("whereabouts %q, want %q", rep.Whereabouts, tc.whereabouts)
				}
				if !strings.Contains(n.log.String(), "rdmanet-install: done") || !strings.Contains(n.log.String(), "took=") {
					t.Errorf("no summary line with timing:\n%s", n.log)
				}
			case err == nil:
				t.Fatalf("Install succeeded, want an error (%v %q)", tc.wantErr, tc.errContains)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			case !strings.Contains(err.Error(), tc.errContains):
				t.Fatalf("error %q does not contain %q", err, tc.errContains)
			}
			if tc.check != nil {
				tc.check(t, n, rep)
			}
		})
	}
}

const guidPoolJSON = `{"name": "default", "ranges": [{"start": "02:00:00:00:00:00:00:01", "end": "02:00:00:00:00:00:ff:ff"}]}`

// guidPool is where the DaemonSet mounts the ConfigMap rdmanet-guid-pool's
// key (beside the node's ConfigMap); withGUIDPool passes it to the install.
func (n *node) guidPool() string { return filepath.Join(n.root, "etc/rdmanet/guid-pool", GUIDPoolConf) }

func withGUIDPool(o *Options) {
	o.GUIDPoolConfig = filepath.Join(filepath.Dir(o.ConfigDir), "guid-pool", GUIDPoolConf)
}

// failingFS serves the image's files, but the copy of one of them breaks
// half-way, as an I/O error or a torn image layer would: its first open
// (the installer's checksum pass) reads fine, later ones fail.
type failingFS struct {
	fs.FS
	name  string
	opens *int
}

func (f failingFS) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil || name != f.name {
		return file, err
	}
	if *f.opens++; *f.opens == 1 {
		return file, nil
	}
	return &halfFile{File: file}, nil
}

type halfFile struct {
	fs.File
	n int
}

func (h *halfFile) Read(p []byte) (int, error) {
	if h.n > 4 {
		return 0, errors.New("input/output error")
	}
	if len(p) > 4 {
		p = p[:4]
	}
	n, err := h.File.Read(p)
	h.n += n
	return n, err
}

// TestInterruptedCopy: a copy that breaks leaves the old file (or none)
// under the real name, never part of the new one; nothing is half-installed
// (00-rdmanet.conf is not written); and the temporary files of a killed
// earlier run are swept by the next install.
func TestInterruptedCopy(t *testing.T) {
	tests := []struct {
		name  string
		prior bool // an earlier complete install (with older binaries)
	}{
		{"fresh node", false},
		{"upgrade", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			if tc.prior {
				writeFile(t, filepath.Join(n.src, "sriov"), "binary sriov v1", 0o755)
				writeFile(t, filepath.Join(n.src, "rdma"), "binary rdma v1", 0o755)
				if _, err := Install(context.Background(), n.options(func(o *Options) { o.Version = "0.1.0" })); err != nil {
					t.Fatal(err)
				}
				os.Remove(filepath.Join(n.conf, MetaConf)) // so the test sees whether this run writes it
				writeFile(t, filepath.Join(n.src, "sriov"), "binary sriov v2", 0o755)
				writeFile(t, filepath.Join(n.src, "rdma"), "binary rdma v2", 0o755)
			}
			// the image's rdma breaks half-way through its copy
			_, err := Install(context.Background(), n.options(func(o *Options) { o.Src = failingFS{FS: os.DirFS(n.src), name: "rdma", opens: new(int)} }))
			if err == nil || !strings.Contains(err.Error(), filepath.Join(n.bin, "rdma")) {
				t.Fatalf("Install with a broken copy: %v, want an error naming %s", err, filepath.Join(n.bin, "rdma"))
			}
			rdma := filepath.Join(n.bin, "rdma")
			if tc.prior {
				if got := readFile(t, rdma); got != "binary rdma v1" {
					t.Errorf("rdma = %q after the broken copy, want the old file", got)
				}
			} else if _, err := os.Stat(rdma); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rdma exists after a broken copy on a fresh node: %v", err)
			}
			if _, err := os.Stat(filepath.Join(n.conf, MetaConf)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("00-rdmanet.conf written by an interrupted install: %v", err)
			}
			noTemps(t, n)
			// uninstall after the interruption still knows every file
			if tc.prior {
				if _, err := Uninstall(n.options()); err != nil {
					t.Fatal(err)
				}
				if got := tree(t, n.bin); len(got) != 0 {
					t.Errorf("uninstall after an interrupted upgrade left %v", got)
				}
				return
			}
			// a killed run leaves temporary files; the next one sweeps them
			writeFile(t, filepath.Join(n.bin, ".rdma.tmp123456"), "half", 0o600)
			writeFile(t, filepath.Join(n.conf, ".00-rdmanet.conf.tmp42"), "{", 0o600)
			if _, err := Install(context.Background(), n.options()); err != nil {
				t.Fatal(err)
			}
			wantInstalled(t, n, true)
		})
	}
}

func TestUninstall(t *testing.T) {
	tests := []struct {
		name   string
		before func(t *testing.T, n *node) // after the install
		opts   func(*Options)
		// left are the files the uninstall must leave (relative to the node root).
		left []string
	}{
		{
			name: "removes exactly what it installed",
			left: nil,
		},
		{
			name: "leaves foreign files",
			before: func(t *testing.T, n *node) {
				writeFile(t, filepath.Join(n.bin, "bridge"), "upstream bridge", 0o755)
				writeFile(t, filepath.Join(n.conf, "10-bridge.conflist"), "{}", 0o644)
				writeFile(t, filepath.Join(n.conf, IPAMDir, "notes"), "an operator's file", 0o644)
			},
			left: []string{"host/opt/cni/bin/bridge", "etc/cni/net.d/10-bridge.conflist", "etc/cni/net.d/rdmanet-ipam.d", "etc/cni/net.d/rdmanet-ipam.d/notes"},
		},
		{
			name: "leaves a whereabouts another project put over rdmanet's",
			before: func(t *testing.T, n *node) {
				copyFile(t, fakeBinary(t, "whereabouts"), filepath.Join(n.bin, Whereabouts), 0o755)
			},
			left: []string{"host/opt/cni/bin/whereabouts"},
		},
		{
			name: "leaves a foreign whereabouts it never installed",
			before: func(t *testing.T, n *node) {
				os.Remove(filepath.Join(n.bin, Whereabouts))
				copyFile(t, fakeBinary(t, "whereabouts"), filepath.Join(n.bin, Whereabouts), 0o755)
				if _, err := Install(context.Background(), n.options()); err != nil { // auto: skips it
					t.Fatal(err)
				}
			},
			left: []string{"host/opt/cni/bin/whereabouts"},
		},
		{
			name: "leaves a config someone changed",
			before: func(t *testing.T, n *node) {
				writeFile(t, filepath.Join(n.conf, MetaConf), `{"edited": true}`, 0o644)
			},
			left: []string{"etc/cni/net.d/00-rdmanet.conf"},
		},
		{
			name: "removes an upgraded rdmanet binary (an rdmanet build of the same command)",
			before: func(t *testing.T, n *node) {
				b := readFile(t, fakeBinary(t, "rdmanet-ipam"))
				writeFile(t, filepath.Join(n.bin, IPAMBinary), b+"\x00hand-upgraded", 0o755)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			if _, err := Install(context.Background(), n.options()); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				tc.before(t, n)
			}
			n.log.Reset()
			rep, err := Uninstall(n.options())
			if err != nil {
				t.Fatalf("Uninstall: %v", err)
			}
			var got []string
			for _, dir := range []string{n.bin, n.conf} {
				for _, f := range tree(t, dir) {
					rel, _ := filepath.Rel(n.root, filepath.Join(dir, strings.Fields(f)[0]))
					got = append(got, rel)
				}
			}
			want := slices.Clone(tc.left)
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("left %v, want %v\nlog:\n%s", got, want, n.log)
			}
			if first := rep.Actions[0]; first.Path != filepath.Join(n.conf, MetaConf) {
				t.Errorf("first removal %+v, want 00-rdmanet.conf first", first)
			}
			// a second uninstall finds nothing to do
			if rep, err := Uninstall(n.options()); err != nil || len(rep.Actions) != 0 {
				t.Errorf("second uninstall: %+v %v", rep, err)
			}
		})
	}
}

func TestServerURL(t *testing.T) {
	tests := []struct {
		name, host, port, want string
		wantErr                bool
	}{
		{"ipv4", "10.96.0.1", "443", "https://10.96.0.1:443", false},
		{"ipv6 is bracketed", "fd00:10:96::1", "443", "https://[fd00:10:96::1]:443", false},
		{"name", "kubernetes.default.svc", "6443", "https://kubernetes.default.svc:6443", false},
		{"no host", "", "443", "", true},
		{"bad port", "10.96.0.1", "https", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ServerURL(tc.host, tc.port)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("ServerURL(%q, %q) = %q, %v", tc.host, tc.port, got, err)
			}
		})
	}
}

func TestMainFlags(t *testing.T) {
	n := newNode(t)
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
	base := []string{"--src-dir=" + n.src, "--cni-bin-dir=" + n.bin, "--cni-conf-dir=" + n.conf, "--config-dir=" + n.config, "--token-dir=" + n.tokens}
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"help", []string{"--help"}, 0, "--install-as-whereabouts"},
		{"bad flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"bad whereabouts mode", append(slices.Clone(base), "--install-as-whereabouts=maybe"), 1, "must be auto, true or false"},
		{"stray argument", []string{"install"}, 2, "unexpected arguments"},
		{"install", base, 0, "rdmanet-install: done"},
		{"reinstall, json logs", append(slices.Clone(base), "--log-format=json"), 0, `"msg":"rdmanet-install: done"`},
		{"uninstall", append(slices.Clone(base), "--uninstall"), 0, "rdmanet-install: uninstalled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(tc.args, func(k string) string { return env[k] }, &out, &errb)
			if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.contains) {
				t.Fatalf("exit %d (want %d), output does not contain %q:\n%s%s", code, tc.code, tc.contains, &out, &errb)
			}
		})
	}
	if kc := readFileIfExists(filepath.Join(n.conf, MetaDir, "rdmanet.kubeconfig")); kc != "" {
		t.Errorf("uninstall left the kubeconfig: %s", kc)
	}
}

func readFileIfExists(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// TestFailingFSIsUsed guards the interrupted-copy test: failingFS really
// fails the read of its file.
func TestFailingFSIsUsed(t *testing.T) {
	f := failingFS{FS: fstest.MapFS{"rdma": {Data: []byte("0123456789")}}, name: "rdma", opens: new(int)}
	if _, err := fs.ReadFile(f, "rdma"); err != nil {
		t.Fatalf("first read: %v", err)
	}
	if _, err := fs.ReadFile(f, "rdma"); err == nil {
		t.Fatal("failingFS read the whole file twice")
	}
}

// TestUpgradeFromSecretTokens: an install over a release that copied the
// long-lived Secret tokens (rdmanet.d/token, rdmanet-ipam.d/{token,ca.crt})
// leaves no copy of them: the meta token is replaced by the pod's projected
// token, the IPAM copies are removed, both kubeconfigs read the one node
// token; and after rdmanet-agent has rewritten the token (a rotation),
// uninstall still removes it.
func TestUpgradeFromSecretTokens(t *testing.T) {
	n := newNode(t)
	const legacy = "legacy-secret-token-without-expiry"
	old := &Manifest{Version: "0.2.0", Dirs: []string{MetaDir, IPAMDir}}
	for _, f := range []struct{ path, content, kind string }{
		{"rdmanet.d/token", legacy, kindSecret}, {"rdmanet.d/ca.crt", testCA, kindConfig},
		{"rdmanet-ipam.d/token", legacy + "-ipam", kindSecret}, {"rdmanet-ipam.d/ca.crt", testCA, kindConfig},
	} {
		writeFile(t, filepath.Join(n.conf, f.path), f.content, 0o600)
		old.Files = append(old.Files, Entry{Root: rootConf, Path: f.path, Kind: f.kind, SHA256: hashBytes([]byte(f.content))})
	}
	if err := writeManifest(filepath.Join(n.conf, MetaDir, ManifestName), old); err != nil {
		t.Fatal(err)
	}
	rep, err := Install(context.Background(), n.options(func(o *Options) { o.Version = "0.3.0" }))
	if err != nil {
		t.Fatalf("Install: %v\n%s", err, n.log)
	}
	removed := map[string]bool{}
	for _, a := range rep.Actions {
		if a.Did == "removed" {
			removed[strings.TrimPrefix(a.Path, n.conf+"/")] = true
		}
	}
	if !removed["rdmanet-ipam.d/token"] || !removed["rdmanet-ipam.d/ca.crt"] {
		t.Errorf("removed %v, want the old IPAM token and CA copies", removed)
	}
	for _, f := range tree(t, n.conf) {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), legacy) {
			t.Errorf("%s still holds the long-lived token", f)
		}
	}
	if got := readFile(t, filepath.Join(n.conf, HostTokenFile)); got != strings.TrimSpace(projectedToken) {
		t.Errorf("%s = %q, want the projected token", HostTokenFile, got)
	}
	m, err := readManifest(filepath.Join(n.conf, MetaDir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(m.Files, func(e Entry) bool { return e.Path == HostTokenFile })
	if i < 0 || m.Files[i].Kind != kindToken {
		t.Fatalf("manifest entry of %s: %+v, want kind %q", HostTokenFile, m.Files, kindToken)
	}
	// a rotation (rdmanet-agent --host-token-file), then uninstall
	writeFile(t, filepath.Join(n.conf, HostTokenFile), "eyJ.rotated.sig", 0o600)
	if _, err := Uninstall(n.options()); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(n.conf, HostTokenFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("uninstall left the rotated node token: %v", err)
	}
}
