package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTarGz: the same files give the same bytes whatever their order and
// disk times; entries are sorted, owned by root, stamped with the time given.
func TestTarGz(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", "a"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("content "+n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Unix(1700000000, 0)
	out := []string{filepath.Join(dir, "1.tar.gz"), filepath.Join(dir, "2.tar.gz")}
	files := []File{{Name: "b", Source: filepath.Join(dir, "b"), Mode: 0o755}, {Name: "a", Source: filepath.Join(dir, "a")}}
	if err := TarGz(out[0], "pkg", files, mtime); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(dir, "a"), time.Now(), time.Now())
	if err := TarGz(out[1], "pkg", []File{files[1], files[0]}, mtime); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out[0])
	b, _ := os.ReadFile(out[1])
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same files differ")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(mtime) {
			t.Errorf("%s: uid %d gid %d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		names = append(names, h.Name+":"+strings.TrimPrefix(os.FileMode(h.Mode).String(), "-"))
	}
	if strings.Join(names, ",") != "pkg/a:rw-r--r--,pkg/b:rwxr-xr-x" {
		t.Fatalf("entries %v", names)
	}
}

// TestWriteSHA256Sums: sha256sum's format over every file but itself, sorted.
func TestWriteSHA256Sums(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644)
	os.WriteFile(filepath.Join(dir, "a"), []byte(""), 0o644)
	os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte("old"), 0o644)
	if err := WriteSHA256Sums(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	want := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a\n3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b\n"
	if string(got) != want {
		t.Fatalf("SHA256SUMS\n%s\nwant\n%s", got, want)
	}
}

// TestKrewManifest: the generated manifest is valid for both
// architectures and reads back; invalid manifests are refused naming the
// field.
func TestKrewManifest(t *testing.T) {
	sum := strings.Repeat("0a", 32)
	archives := []KrewArchive{{Arch: "amd64", URI: "https://example.invalid/a.tar.gz", SHA256: sum}, {Arch: "arm64", URI: "https://example.invalid/b.tar.gz", SHA256: sum}}
	m, err := KrewManifest("0.2.0", archives)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseKrewManifest(m)
	if err != nil {
		t.Fatalf("%v\n%s", err, m)
	}
	if p.Metadata.Name != "rdma" || p.Spec.Version != "v0.2.0" || len(p.Spec.Platforms) != 2 || p.Spec.Platforms[1].Selector.MatchLabels["arch"] != "arm64" || p.Spec.Platforms[0].Bin != "kubectl-rdma" {
		t.Fatalf("manifest %+v", p)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"unknown field", "  version:", "  versoin: x\n  version:", "unknown field"},
		{"version without v", "version: v0.2.0", "version: 0.2.0", "spec.version"},
		{"bad sha256", "sha256: " + sum, "sha256: abc", "sha256"},
		{"http uri", "https://example.invalid/a", "http://example.invalid/a", "uri"},
		{"name with capitals", "name: rdma", "name: RDMA", "metadata.name"},
		{"absolute file destination", "to: .", "to: /usr/bin", "file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(m), tc.from, tc.to, 1)
			if bad == string(m) {
				t.Fatalf("%q not in the manifest:\n%s", tc.from, m)
			}
			if _, err := ParseKrewManifest([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseKrewManifest: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
