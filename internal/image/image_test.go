package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// moduleRoot is the repository root (the tests run in internal/image).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// layerEntry is what a test sees of one layer entry.
type layerEntry struct {
	hdr  tar.Header
	data []byte
}

// load reads an archive back the way an importer does: the image under its
// tag, its config, its one layer's entries.
func load(t testing.TB, r Result) (v1.Image, *v1.ConfigFile, map[string]layerEntry, []string) {
	t.Helper()
	tag, err := name.NewTag(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(r.Path, &tag)
	if err != nil {
		t.Fatalf("load %s as %s: %v", r.Path, r.Ref, err)
	}
	d, err := img.Digest()
	if err != nil || d.String() != r.Digest {
		t.Fatalf("archive's image digest %v (%v), Build reported %s", d, err, r.Digest)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	entries := map[string]layerEntry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = layerEntry{hdr: *h, data: b}
		order = append(order, h.Name)
	}
	return img, cfg, entries, order
}

func fileSum(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestBuildReproducible: the same inputs give the same digest and the same
// archive bytes whatever the files' mtimes, their order in the spec or the
// directory they come from; a changed input changes the digest.
func TestBuildReproducible(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	stage := func(t *testing.T, content string, mtime time.Time) string {
		dir := t.TempDir()
		for _, f := range []string{"a", "b"} {
			p := filepath.Join(dir, f)
			if err := os.WriteFile(p, []byte(content+f), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	spec := func(dir, out string, reverse bool) Spec {
		files := []File{
			{Path: "/opt/x/bin/a", Source: filepath.Join(dir, "a"), Mode: 0o755},
			{Path: "/opt/x/bin/b", Source: filepath.Join(dir, "b"), Mode: 0o755},
			{Path: "/opt/x/bin/c", Link: "a"},
			{Path: "/etc/x.conf", Data: []byte("k=v\n")},
		}
		if reverse {
			slices.Reverse(files)
		}
		return Spec{Ref: "example/x:1", Files: files, Cmd: []string{"/opt/x/bin/a"}, Labels: map[string]string{"l1": "1", "l2": "2"},
			Output: filepath.Join(out, "x.tar")}
	}
	base, err := Build(spec(stage(t, "v1", time.Now()), t.TempDir(), false))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		content string
		mtime   time.Time
		reverse bool
		epoch   string
		same    bool
	}{
		{"same inputs, other dir, other mtimes, other order", "v1", time.Unix(12345, 678), true, "", true},
		{"SOURCE_DATE_EPOCH=0 is the default", "v1", time.Now(), false, "0", true},
		{"changed content", "v2", time.Now(), false, "", false},
		{"other SOURCE_DATE_EPOCH", "v1", time.Now(), false, "1700000000", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SOURCE_DATE_EPOCH", tc.epoch)
			r, err := Build(spec(stage(t, tc.content, tc.mtime), t.TempDir(), tc.reverse))
			if err != nil {
				t.Fatal(err)
			}
			if same := r.Digest == base.Digest; same != tc.same {
				t.Fatalf("digest %s vs %s: same=%v, want %v", r.Digest, base.Digest, same, tc.same)
			}
			if tc.same && (fileSum(t, r.Path) != fileSum(t, base.Path) || r.Size != base.Size) {
				t.Fatalf("same digest, but the archives differ")
			}
		})
	}
	_, cfg, entries, order := load(t, base)
	if !slices.IsSorted(order) {
		t.Errorf("layer entries not sorted: %v", order)
	}
	want := []string{"etc/", "etc/x.conf", "opt/", "opt/x/", "opt/x/bin/", "opt/x/bin/a", "opt/x/bin/b", "opt/x/bin/c"}
	if !slices.Equal(order, want) {
		t.Errorf("entries %v, want %v", order, want)
	}
	for n, e := range entries {
		if e.hdr.Uid != 0 || e.hdr.Gid != 0 || e.hdr.Uname != "" || !e.hdr.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: uid %d gid %d uname %q time %v", n, e.hdr.Uid, e.hdr.Gid, e.hdr.Uname, e.hdr.ModTime)
		}
	}
	if m := entries["opt/x/bin/a"].hdr.Mode; m != 0o755 {
		t.Errorf("a mode %o", m)
	}
	if m := entries["etc/x.conf"].hdr.Mode; m != 0o644 {
		t.Errorf("x.conf mode %o", m)
	}
	if e := entries["opt/x/bin/c"]; e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != "a" {
		t.Errorf("c: %+v", e.hdr)
	}
	if cfg.RootFS.Type != "layers" || !cfg.Created.Equal(time.Unix(0, 0)) || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("config %+v", cfg)
	}
}

func TestBuildRefuses(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.tar")
	tests := []struct {
		name string
		spec Spec
		err  string
	}{
		{"no tag", Spec{Ref: "example/x", Output: out}, "repository:tag"},
		{"registry-less digest", Spec{Ref: "example/x@sha256:abc", Output: out}, "reference"},
		{"relative path", Spec{Ref: "example/x:1", Output: out, Files: []File{{Path: "bin/a", Data: []byte("x")}}}, "absolute and clean"},
		{"twice", Spec{Ref: "example/x:1", Output: out, Files: []File{{Path: "/a", Data: []byte("x")}, {Path: "/a", Source: script}}}, "given twice"},
		{"missing source", Spec{Ref: "example/x:1", Output: out, Files: []File{{Path: "/a", Source: script + ".nope"}}}, "no such file"},
		{"no output", Spec{Ref: "example/x:1"}, "no Output"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Build: %v, want an error containing %q", err, tc.err)
			}
		})
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused build left %s", out)
	}
}

// buildPause builds the pause binary statically (a small static Go binary
// for the static-check tests).
func buildPause(t *testing.T) string {
	t.Helper()
	bins, err := GoBuild{Dir: moduleRoot(t), Packages: []string{PausePackage}, OutDir: t.TempDir()}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return bins[0]
}

func TestCheckStatic(t *testing.T) {
	static := buildPause(t)
	dynamic := ""
	for _, c := range []string{"/bin/ls", "/usr/bin/env", "/bin/true"} {
		if f, err := elf.Open(c); err == nil {
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					dynamic = c
				}
			}
			f.Close()
		}
		if dynamic != "" {
			break
		}
	}
	tests := []struct {
		name, path, err string
	}{
		{"static Go binary (CGO_ENABLED=0)", static, ""},
		{"dynamic binary", dynamic, "dynamically linked"},
		{"not an ELF file", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte("#!/bin/sh\necho not ELF\n")
			if tc.path == "" && tc.err != "" {
				t.Skip("no dynamically linked binary on this machine")
			}
			if tc.path != "" {
				var err error
				if data, err = os.ReadFile(tc.path); err != nil {
					t.Fatal(err)
				}
			}
			err := checkStatic("bin/x", data)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("checkStatic(%s) = %v, want %q", tc.path, err, tc.err)
			}
		})
	}
	if dynamic != "" {
		_, err := Build(Spec{Ref: "example/x:1", Output: filepath.Join(t.TempDir(), "x.tar"), RequireStatic: true,
			Files: []File{{Path: "/bin/x", Source: dynamic, Mode: 0o755}}})
		if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Fatalf("Build with a dynamic binary: %v", err)
		}
	}
}

// TestRdmanetImage builds the rdmanet image (two of its commands, to keep
// the test's build short; `make image` builds them all) twice, production
// and sim: the same digest twice; only /opt/rdmanet/bin and its static
// binaries, owned by root, writable by nobody else; no shell; the config and
// labels; the sim variant's binaries carry the test-hooks build tag.
func TestRdmanetImage(t *testing.T) {
	root := moduleRoot(t)
	pkgs := []string{"./cmd/rdmanet", "./cmd/rdmanet-install"}
	tests := []struct {
		name    string
		sim     bool
		tag     string
		variant string
	}{
		{"production", false, "9.8.7", "production"},
		{"sim", true, "9.8.7-sim", "sim"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var results []Result
			for range 2 {
				r, err := Rdmanet(context.Background(), RdmanetOptions{Dir: root, Version: "9.8.7", Sim: tc.sim, OutDir: t.TempDir(), Packages: pkgs})
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, r)
			}
			r := results[0]
			if results[1].Digest != r.Digest || fileSum(t, results[1].Path) != fileSum(t, r.Path) {
				t.Fatalf("two builds of the same tree: %s and %s", r.Digest, results[1].Digest)
			}
			if r.Ref != "rdmanet/rdmanet:"+tc.tag || filepath.Base(r.Path) != "rdmanet-"+tc.tag+".tar" {
				t.Fatalf("ref %s path %s", r.Ref, r.Path)
			}
			if !strings.Contains(r.String(), r.Digest) || !strings.Contains(r.String(), r.Ref) || strings.Count(r.String(), "\n") != 0 {
				t.Errorf("summary line %q", r.String())
			}
			_, cfg, entries, order := load(t, r)
			want := []string{"opt/", "opt/rdmanet/", "opt/rdmanet/bin/", "opt/rdmanet/bin/rdmanet", "opt/rdmanet/bin/rdmanet-install"}
			if !slices.Equal(order, want) {
				t.Fatalf("image files %v, want %v", order, want)
			}
			for _, n := range []string{"bin/sh", "bin/busybox", "bin/", "usr/", "etc/"} {
				if _, ok := entries[n]; ok {
					t.Errorf("image has %s", n)
				}
			}
			for n, e := range entries {
				if e.hdr.Uid != 0 || e.hdr.Gid != 0 || e.hdr.Mode&0o022 != 0 {
					t.Errorf("%s: uid %d gid %d mode %o: want root's, writable by root only", n, e.hdr.Uid, e.hdr.Gid, e.hdr.Mode)
				}
				if e.hdr.Typeflag != tar.TypeReg {
					continue
				}
				f, err := elf.NewFile(bytes.NewReader(e.data))
				if err != nil {
					t.Fatalf("%s: %v", n, err)
				}
				for _, p := range f.Progs {
					if p.Type == elf.PT_INTERP {
						t.Errorf("%s has PT_INTERP: not static", n)
					}
				}
				// the build tags, as the binary's Go build info records them
				p := filepath.Join(t.TempDir(), "bin")
				if err := os.WriteFile(p, e.data, 0o755); err != nil {
					t.Fatal(err)
				}
				bi, err := inspect.File(p)
				if err != nil {
					t.Fatal(err)
				}
				if hooks := strings.Contains(bi.Tags, SimTag); hooks != tc.sim {
					t.Errorf("%s built with tags %q: test hooks %v, want %v", n, bi.Tags, hooks, tc.sim)
				}
				if n == "opt/rdmanet/bin/rdmanet-install" {
					out, err := exec.Command(p, "--version").Output()
					if err != nil || !strings.HasPrefix(string(out), "rdmanet-install 9.8.7 ") {
						t.Errorf("rdmanet-install --version = %q, %v", out, err)
					}
				}
			}
			c := cfg.Config
			if len(c.Entrypoint) != 0 || !slices.Equal(c.Env, []string{"PATH=/opt/rdmanet/bin"}) || c.Labels["org.opencontainers.image.version"] != "9.8.7" ||
				c.Labels["io.rdmanet.variant"] != tc.variant || (c.Labels["io.rdmanet.build-tags"] == SimTag) != tc.sim {
				t.Errorf("config %+v", c)
			}
		})
	}
}

func TestPauseImage(t *testing.T) {
	r, err := Pause(context.Background(), PauseOptions{Dir: moduleRoot(t), OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, cfg, entries, order := load(t, r)
	if r.Ref != PauseRef || !slices.Equal(order, []string{"pause"}) || entries["pause"].hdr.Mode != 0o755 {
		t.Fatalf("ref %s, entries %v", r.Ref, order)
	}
	if err := checkStatic("pause", entries["pause"].data); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/pause"}) || cfg.Config.User != "65535:65535" {
		t.Errorf("config %+v", cfg.Config)
	}
}

func TestTestboxImage(t *testing.T) {
	bb := "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %s missing (apt-get install -y busybox-static): %v", bb, err)
		}
		t.Skipf("%s missing (apt-get install -y busybox-static): %v", bb, err)
	}
	r, err := Testbox(context.Background(), TestboxOptions{OutDir: t.TempDir(), Dir: moduleRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, cfg, entries, _ := load(t, r)
	if r.Ref != TestboxRef {
		t.Fatalf("ref %s", r.Ref)
	}
	for _, a := range []string{"sh", "ip", "ls", "cat", "sleep", "echo", "grep", "mkdir", "env"} {
		if e, ok := entries["bin/"+a]; !ok || e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != "busybox" {
			t.Errorf("bin/%s: %+v", a, e.hdr)
		}
	}
	if e, ok := entries["bin/rdmanet-rendezvous"]; !ok || e.hdr.Typeflag != tar.TypeReg || e.hdr.Mode&0o111 == 0 {
		t.Errorf("bin/rdmanet-rendezvous (the cross-node test program) missing or not executable: %+v", e.hdr)
	}
	if e := entries["tmp/"]; e.hdr.Mode != 0o1777 {
		t.Errorf("tmp mode %o, want 1777", e.hdr.Mode)
	}
	if len(cfg.Config.Entrypoint) != 0 || !slices.Equal(cfg.Config.Cmd, []string{"sleep", "infinity"}) {
		t.Errorf("config %+v", cfg.Config)
	}
}
