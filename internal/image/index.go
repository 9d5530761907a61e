package image

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// IndexSpec is a multi-platform image: one OCI image index whose manifests
// are one image per platform.
type IndexSpec struct {
	// Ref is the tag the archive carries ("rdmanet/rdmanet:0.2.0").
	Ref string
	// Images are the platforms' images (Arch set in each; Ref and Output
	// are ignored).
	Images []Spec
	// Annotations of the index (org.opencontainers.image.*).
	Annotations map[string]string
	// Output is the archive to write: an OCI image layout as a tar.
	Output string
	// Created stamps the archive's entries (zero: $SOURCE_DATE_EPOCH, else 0).
	Created time.Time
}

// Platform is one image of an index.
type Platform struct {
	OS     string `json:"os"`
	Arch   string `json:"architecture"`
	Digest string `json:"digest"`
	ID     string `json:"id"`
	Files  int    `json:"files"`
}

// IndexResult describes a built index.
type IndexResult struct {
	Ref string `json:"ref"`
	// Digest is the index's digest: what a registry shows for the tag once
	// the layout is pushed as it is (crane push --index, skopeo copy --all).
	Digest    string     `json:"digest"`
	Platforms []Platform `json:"platforms"`
	Size      int64      `json:"size"`
	Path      string     `json:"path"`
}

func (r IndexResult) String() string {
	var p []string
	for _, x := range r.Platforms {
		p = append(p, fmt.Sprintf("%s/%s %s", x.OS, x.Arch, x.Digest))
	}
	return fmt.Sprintf("image index %s digest %s size %s (%d bytes) archive %s platforms: %s",
		r.Ref, r.Digest, humanSize(r.Size), r.Size, r.Path, strings.Join(p, ", "))
}

// ContainerdNameAnnotation names the image an index.json entry is when
// containerd (`ctr images import`) and Docker (`docker load`) import an
// OCI layout archive; RefNameAnnotation is the OCI layout's own tag.
const (
	ContainerdNameAnnotation = "io.containerd.image.name"
	RefNameAnnotation        = "org.opencontainers.image.ref.name"
)

// BuildIndex assembles every platform's image (OCI media types), the image
// index over them and writes an OCI image layout archive (oci-layout,
// index.json, blobs/sha256/...) to s.Output: the same inputs give the same
// bytes. index.json names the index with the full reference
// (io.containerd.image.name, docker.io/ for a name without a registry) and
// the tag (org.opencontainers.image.ref.name). Import: `ctr -n k8s.io
// images import --all-platforms FILE`, `docker load -i FILE` (Docker 25 or
// later), `skopeo copy --all oci-archive:FILE docker://REG/...`, or extract
// it and `crane push --index DIR REF`.
func BuildIndex(s IndexSpec) (IndexResult, error) {
	if s.Output == "" {
		return IndexResult{}, errors.New("image index: no Output path")
	}
	if len(s.Images) == 0 {
		return IndexResult{}, errors.New("image index: no platform images")
	}
	tag, err := name.NewTag(s.Ref)
	if err == nil && !strings.HasSuffix(s.Ref, ":"+tag.TagStr()) {
		err = errors.New("no tag")
	}
	if err != nil {
		return IndexResult{}, fmt.Errorf("image reference %q: %w (want repository:tag, e.g. rdmanet/rdmanet:0.2.0)", s.Ref, err)
	}
	created := s.Created
	if created.IsZero() {
		if created, err = Epoch(); err != nil {
			return IndexResult{}, err
		}
	}
	outDir := filepath.Dir(s.Output)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return IndexResult{}, fmt.Errorf("image output: %w", err)
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var res IndexResult
	seen := map[string]bool{}
	for i := range s.Images {
		sp := s.Images[i]
		if sp.Arch == "" {
			return IndexResult{}, fmt.Errorf("image index %s: platform image %d has no Arch", s.Ref, i)
		}
		if sp.OS == "" {
			sp.OS = "linux"
		}
		if seen[sp.OS+"/"+sp.Arch] {
			return IndexResult{}, fmt.Errorf("image index %s: platform %s/%s given twice", s.Ref, sp.OS, sp.Arch)
		}
		seen[sp.OS+"/"+sp.Arch] = true
		sp.Ref = s.Ref
		img, files, cleanup, err := sp.assemble(outDir, true)
		if err != nil {
			return IndexResult{}, fmt.Errorf("image index %s, %s/%s: %w", s.Ref, sp.OS, sp.Arch, err)
		}
		defer cleanup()
		d, err := img.Digest()
		if err != nil {
			return IndexResult{}, err
		}
		id, err := img.ConfigName()
		if err != nil {
			return IndexResult{}, err
		}
		res.Platforms = append(res.Platforms, Platform{OS: sp.OS, Arch: sp.Arch, Digest: d.String(), ID: id.String(), Files: files})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: sp.OS, Architecture: sp.Arch},
		}})
	}
	if len(s.Annotations) > 0 {
		idx = mutate.Annotations(idx, s.Annotations).(v1.ImageIndex)
	}
	digest, err := idx.Digest()
	if err != nil {
		return IndexResult{}, fmt.Errorf("image index digest: %w", err)
	}
	rawIdx, err := idx.RawManifest()
	if err != nil {
		return IndexResult{}, err
	}
	top := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIImageIndex,
			Digest:    digest,
			Size:      int64(len(rawIdx)),
			Annotations: map[string]string{
				ContainerdNameAnnotation: fullName(tag),
				RefNameAnnotation:        tag.TagStr(),
			},
		}},
	}
	topJSON, err := json.Marshal(top)
	if err != nil {
		return IndexResult{}, err
	}

	tmp := s.Output + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return IndexResult{}, fmt.Errorf("image archive: %w", err)
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := writeLayout(bw, idx, topJSON, created.UTC().Truncate(time.Second)); err != nil {
		f.Close()
		return IndexResult{}, fmt.Errorf("image archive %s: %w", s.Output, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return IndexResult{}, err
	}
	if err := f.Close(); err != nil {
		return IndexResult{}, err
	}
	if err := os.Rename(tmp, s.Output); err != nil {
		return IndexResult{}, err
	}
	st, err := os.Stat(s.Output)
	if err != nil {
		return IndexResult{}, err
	}
	res.Ref, res.Digest, res.Size, res.Path = s.Ref, digest.String(), st.Size(), s.Output
	return res, nil
}

// writeLayout writes an OCI image layout tar of idx: oci-layout,
// index.json (top), then every blob once, sorted by digest.
func writeLayout(w io.Writer, idx v1.ImageIndex, top []byte, mtime time.Time) error {
	type blob struct {
		size int64
		open func() (io.ReadCloser, error)
	}
	blobs := map[string]blob{}
	addBytes := func(b []byte) {
		h, _, _ := v1.SHA256(strings.NewReader(string(b)))
		blobs[h.Hex] = blob{int64(len(b)), func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(b))), nil }}
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	addBytes(raw)
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		m, err := img.RawManifest()
		if err != nil {
			return err
		}
		addBytes(m)
		c, err := img.RawConfigFile()
		if err != nil {
			return err
		}
		addBytes(c)
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		for _, l := range layers {
			ld, err := l.Digest()
			if err != nil {
				return err
			}
			sz, err := l.Size()
			if err != nil {
				return err
			}
			blobs[ld.Hex] = blob{sz, l.Compressed}
		}
	}
	tw := tar.NewWriter(w)
	hdr := func(name string, typ byte, size int64) error {
		mode := int64(0o644)
		if typ == tar.TypeDir {
			mode = 0o755
		}
		return tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Size: size, Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, b []byte) error {
		if err := hdr(name, tar.TypeReg, int64(len(b))); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := file("index.json", top); err != nil {
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := hdr(d, tar.TypeDir, 0); err != nil {
			return err
		}
	}
	for _, h := range slices.Sorted(func(yield func(string) bool) {
		for h := range blobs {
			if !yield(h) {
				return
			}
		}
	}) {
		b := blobs[h]
		if err := hdr("blobs/sha256/"+h, tar.TypeReg, b.size); err != nil {
			return err
		}
		rc, err := b.open()
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("blob %s: %w", h, err)
		}
		if n != b.size {
			return fmt.Errorf("blob %s: %d bytes, want %d", h, n, b.size)
		}
	}
	return tw.Close()
}

// fullName is the reference as containerd and Docker name images:
// docker.io/ for Docker Hub (go-containerregistry says index.docker.io).
func fullName(tag name.Tag) string {
	reg := tag.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + tag.RepositoryStr() + ":" + tag.TagStr()
}
