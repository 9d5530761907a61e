package image

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestRdmanetIndex builds the two-architecture rdmanet image (two of its
// commands) twice: the same archive bytes and digest twice; the archive is
// an OCI image layout whose index.json names the image for containerd and
// Docker; go-containerregistry reads it back as one OCI index with a
// linux/amd64 and a linux/arm64 image, each of static binaries of its
// architecture; the stage directories keep each architecture's binaries.
func TestRdmanetIndex(t *testing.T) {
	root := moduleRoot(t)
	pkgs := []string{"./cmd/rdmanet", "./cmd/rdmanet-install"}
	var results []IndexResult
	var outs []string
	for range 2 {
		out := t.TempDir()
		r, err := RdmanetIndex(context.Background(), RdmanetOptions{Dir: root, Version: "9.8.7", OutDir: out, Packages: pkgs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		results, outs = append(results, r), append(outs, out)
	}
	r := results[0]
	if results[1].Digest != r.Digest || fileSum(t, results[1].Path) != fileSum(t, r.Path) {
		t.Fatalf("two builds of the same tree: %s and %s", r.Digest, results[1].Digest)
	}
	if r.Ref != "rdmanet/rdmanet:9.8.7" || filepath.Base(r.Path) != "rdmanet-9.8.7.oci.tar" || len(r.Platforms) != 2 {
		t.Fatalf("result %+v", r)
	}
	if !strings.Contains(r.String(), r.Digest) || strings.Contains(r.String(), "\n") {
		t.Errorf("summary line %q", r.String())
	}
	dir := t.TempDir()
	untar(t, r.Path, dir)
	var top v1.IndexManifest
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", b, err)
	}
	if a := top.Manifests[0].Annotations; a[ContainerdNameAnnotation] != "docker.io/rdmanet/rdmanet:9.8.7" || a[RefNameAnnotation] != "9.8.7" || top.Manifests[0].Digest.String() != r.Digest {
		t.Fatalf("index.json entry %+v, want the index %s named docker.io/rdmanet/rdmanet:9.8.7", top.Manifests[0], r.Digest)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := inner.MediaType(); mt != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("index media type %s, %d manifests", mt, len(im.Manifests))
	}
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for i, d := range im.Manifests {
		arch := Arches[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch || d.Digest.String() != r.Platforms[i].Digest {
			t.Fatalf("manifest %d: %+v, want linux/%s %s", i, d, arch, r.Platforms[i].Digest)
		}
		img, err := inner.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil || cfg.Architecture != arch || cfg.OS != "linux" || cfg.Config.Labels["org.opencontainers.image.version"] != "9.8.7" {
			t.Fatalf("%s config %+v: %v", arch, cfg, err)
		}
		if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
			t.Errorf("%s manifest media type %s", arch, mt)
		}
		layers, _ := img.Layers()
		if len(layers) != 1 {
			t.Fatalf("%s: %d layers", arch, len(layers))
		}
		if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
			t.Errorf("%s layer media type %s", arch, mt)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		var bins int
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			data, _ := io.ReadAll(tr)
			f, err := elf.NewFile(strings.NewReader(string(data)))
			if err != nil {
				t.Fatalf("%s %s: %v", arch, h.Name, err)
			}
			if f.Machine != wantMachine[arch] {
				t.Errorf("%s %s: ELF machine %v", arch, h.Name, f.Machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s %s: dynamically linked", arch, h.Name)
				}
			}
			bins++
		}
		rc.Close()
		if bins != 2 {
			t.Errorf("%s: %d binaries, want 2", arch, bins)
		}
		if _, err := os.Stat(filepath.Join(StageDir(outs[0], "9.8.7", arch), "rdmanet-install")); err != nil {
			t.Errorf("stage directory of %s: %v", arch, err)
		}
	}
}

// TestBuildIndexRefuses: an index needs platforms, each once, and a tag.
func TestBuildIndexRefuses(t *testing.T) {
	file := []File{{Path: "/x", Data: []byte("x")}}
	out := filepath.Join(t.TempDir(), "x.oci.tar")
	for _, tc := range []struct {
		name string
		spec IndexSpec
		want string
	}{
		{"no platforms", IndexSpec{Ref: "a/b:1", Output: out}, "no platform images"},
		{"no arch", IndexSpec{Ref: "a/b:1", Output: out, Images: []Spec{{Files: file}}}, "has no Arch"},
		{"platform twice", IndexSpec{Ref: "a/b:1", Output: out, Images: []Spec{{Files: file, Arch: "arm64"}, {Files: file, Arch: "arm64"}}}, "given twice"},
		{"no tag", IndexSpec{Ref: "a/b", Output: out, Images: []Spec{{Files: file, Arch: "arm64"}}}, "want repository:tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := BuildIndex(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BuildIndex: %v, want %q", err, tc.want)
			}
		})
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
