// Package image assembles rdmanet's OCI images without a container daemon,
// over go-containerregistry: one layer built from a sorted file list with
// fixed owners, modes and timestamps, a config, and a docker-save style
// archive (tarball.MultiRefWrite) that both `ctr images import` and
// `docker load` accept. The same inputs give the same digest.
//
// Build is the general entry; Rdmanet, Pause and Testbox are the images the
// project builds (`make image`, `make image-sim`, `make image-pause`,
// `make image-testbox`; the real-node test harness calls Pause and Testbox).
package image

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of an image's filesystem.
type File struct {
	// Path is the absolute path in the image ("/opt/rdmanet/bin/sriov").
	Path string
	// Source is a file on this machine whose content the entry gets; or
	// Data is the content; or Link makes the entry a symlink to Link.
	Source string
	Data   []byte
	Link   string
	// Mode is the permission bits (0755 for a binary); 0 means 0644.
	// Owner and group are always 0, the time is the image's Created.
	Mode fs.FileMode
}

// Dir is a directory with a mode other than the default 0755 (parents of
// files are added as 0755 directories without being listed).
type Dir struct {
	Path string
	Mode fs.FileMode // e.g. 0o1777 | fs.ModeSticky for /tmp
}

// Spec is one image.
type Spec struct {
	// Ref is the tag the archive carries, e.g. "rdmanet/rdmanet:0.2.0" or
	// "localhost/pause:rdmanet" (a tag is required; no digest references).
	Ref   string
	Files []File
	Dirs  []Dir
	// The image config.
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	Labels     map[string]string
	// Created is the image's and every entry's time; zero means
	// $SOURCE_DATE_EPOCH, else the Unix epoch (see Epoch).
	Created time.Time
	// OS and Arch of the image (default linux, this machine's GOARCH).
	OS, Arch string
	// Output is the archive to write (a docker-save style tar).
	Output string
	// RequireStatic refuses an ELF file that needs a dynamic loader
	// (PT_INTERP) or shared libraries: the image has no libc.
	RequireStatic bool
}

// Result describes a built image.
type Result struct {
	Ref string `json:"ref"`
	// Digest is the manifest digest (the image's digest in a registry once
	// pushed as it is, e.g. with `crane push`).
	Digest string `json:"digest"`
	// ID is the config digest: the image ID docker and ctr show.
	ID string `json:"id"`
	// Size is the archive's size in bytes, Path where it is.
	Size int64  `json:"size"`
	Path string `json:"path"`
	// Files counts the layer's entries (directories, files, links).
	Files int `json:"files"`
}

// String is the one-line summary the make targets print.
func (r Result) String() string {
	return fmt.Sprintf("image %s digest %s id %s size %s (%d bytes) files %d archive %s",
		r.Ref, r.Digest, r.ID, humanSize(r.Size), r.Size, r.Files, r.Path)
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// Epoch is the time reproducible builds stamp: $SOURCE_DATE_EPOCH (Unix
// seconds) when set, else 1970-01-01T00:00:00Z.
func Epoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: must be Unix seconds (e.g. $(git log -1 --format=%%ct))", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// entry is one tar entry, resolved.
type entry struct {
	name string // relative, no leading slash; directories without trailing slash
	hdr  tar.Header
	src  string
	data []byte
}

// entries resolves a spec's files and dirs into a sorted, complete list
// (every parent directory present), refusing duplicates and bad paths.
func (s *Spec) entries(created time.Time) ([]entry, error) {
	byName := map[string]*entry{}
	add := func(p string, e entry) error {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return fmt.Errorf("image path %q: must be absolute and clean (e.g. /opt/rdmanet/bin/sriov)", p)
		}
		n := strings.TrimPrefix(p, "/")
		if old, ok := byName[n]; ok {
			if old.hdr.Typeflag == tar.TypeDir && e.hdr.Typeflag == tar.TypeDir {
				if e.hdr.Mode != 0o755 {
					old.hdr.Mode = e.hdr.Mode
				}
				return nil
			}
			return fmt.Errorf("image path %s given twice", p)
		}
		e.name = n
		e.hdr.Name = n
		e.hdr.ModTime = created
		e.hdr.Uid, e.hdr.Gid = 0, 0
		byName[n] = &e
		return nil
	}
	dir := func(p string, mode fs.FileMode) error {
		m := int64(mode.Perm())
		if mode&fs.ModeSticky != 0 {
			m |= 0o1000
		}
		return add(p, entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: m}})
	}
	parents := func(p string) error {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if err := dir(d, 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range s.Dirs {
		if err := parents(d.Path); err != nil {
			return nil, err
		}
		if err := dir(d.Path, d.Mode); err != nil {
			return nil, err
		}
	}
	for _, f := range s.Files {
		if err := parents(f.Path); err != nil {
			return nil, err
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		switch {
		case f.Link != "":
			if err := add(f.Path, entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Linkname: f.Link, Mode: 0o777}}); err != nil {
				return nil, err
			}
		case f.Source != "":
			st, err := os.Stat(f.Source)
			if err != nil {
				return nil, fmt.Errorf("image file %s: %w", f.Path, err)
			}
			if !st.Mode().IsRegular() {
				return nil, fmt.Errorf("image file %s: source %s is not a regular file", f.Path, f.Source)
			}
			if err := add(f.Path, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: int64(mode), Size: st.Size()}, src: f.Source}); err != nil {
				return nil, err
			}
		default:
			if err := add(f.Path, entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: int64(mode), Size: int64(len(f.Data))}, data: f.Data}); err != nil {
				return nil, err
			}
		}
	}
	names := slices.Sorted(maps.Keys(byName))
	out := make([]entry, 0, len(names))
	for _, n := range names {
		e := *byName[n]
		if e.hdr.Typeflag == tar.TypeDir {
			e.hdr.Name += "/"
		}
		out = append(out, e)
	}
	return out, nil
}

// writeLayer writes the layer's tar to w, checking each file's size (a
// source that changed under the build fails it).
func writeLayer(w io.Writer, entries []entry, requireStatic bool) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := e.hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("layer entry /%s: %w", e.name, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data := e.data
		if e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return fmt.Errorf("layer entry /%s: %w", e.name, err)
			}
			if int64(len(b)) != hdr.Size {
				return fmt.Errorf("layer entry /%s: %s changed size during the build", e.name, e.src)
			}
			data = b
		}
		if requireStatic {
			if err := checkStatic(e.name, data); err != nil {
				return err
			}
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("layer entry /%s: %w", e.name, err)
		}
	}
	return tw.Close()
}

// Build assembles the image of s and writes its archive to s.Output.
func Build(s Spec) (Result, error) {
	if s.Output == "" {
		return Result{}, errors.New("image: no Output path")
	}
	tag, err := name.NewTag(s.Ref)
	if err == nil && !strings.HasSuffix(s.Ref, ":"+tag.TagStr()) {
		err = errors.New("no tag")
	}
	if err != nil {
		return Result{}, fmt.Errorf("image reference %q: %w (want repository:tag, e.g. rdmanet/rdmanet:0.2.0)", s.Ref, err)
	}
	outDir := filepath.Dir(s.Output)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Result{}, fmt.Errorf("image output: %w", err)
	}
	img, files, cleanup, err := s.assemble(outDir, false)
	if err != nil {
		return Result{}, err
	}
	defer cleanup()
	digest, err := img.Digest()
	if err != nil {
		return Result{}, fmt.Errorf("image digest: %w", err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return Result{}, fmt.Errorf("image config digest: %w", err)
	}

	tmp := s.Output + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return Result{}, fmt.Errorf("image archive: %w", err)
	}
	defer os.Remove(tmp)
	fw := bufio.NewWriterSize(f, 1<<20)
	if err := tarball.MultiRefWrite(map[name.Reference]v1.Image{tag: img}, fw); err != nil {
		f.Close()
		return Result{}, fmt.Errorf("image archive %s: %w", s.Output, err)
	}
	if err := fw.Flush(); err != nil {
		f.Close()
		return Result{}, fmt.Errorf("image archive %s: %w", s.Output, err)
	}
	if err := f.Close(); err != nil {
		return Result{}, fmt.Errorf("image archive %s: %w", s.Output, err)
	}
	if err := os.Rename(tmp, s.Output); err != nil {
		return Result{}, fmt.Errorf("image archive: %w", err)
	}
	st, err := os.Stat(s.Output)
	if err != nil {
		return Result{}, err
	}
	return Result{Ref: s.Ref, Digest: digest.String(), ID: id.String(), Size: st.Size(), Path: s.Output, Files: files}, nil
}

// assemble builds the image of s (its layer through a temporary file in
// tmpDir, removed by cleanup once the image has been written) and returns
// it with its layer's entry count. oci gives it OCI media types (manifest,
// config, layer) instead of Docker's (an OCI image index holds OCI images).
func (s *Spec) assemble(tmpDir string, oci bool) (v1.Image, int, func(), error) {
	nop := func() {}
	created := s.Created
	var err error
	if created.IsZero() {
		if created, err = Epoch(); err != nil {
			return nil, 0, nop, err
		}
	}
	created = created.UTC().Truncate(time.Second)
	entries, err := s.entries(created)
	if err != nil {
		return nil, 0, nop, err
	}
	// the layer, through a temporary file (binaries are large)
	lf, err := os.CreateTemp(tmpDir, ".layer-*.tar")
	if err != nil {
		return nil, 0, nop, fmt.Errorf("image layer: %w", err)
	}
	cleanup := func() { os.Remove(lf.Name()) }
	fail := func(err error) (v1.Image, int, func(), error) {
		cleanup()
		return nil, 0, nop, err
	}
	bw := bufio.NewWriterSize(lf, 1<<20)
	if err := writeLayer(bw, entries, s.RequireStatic); err != nil {
		lf.Close()
		return fail(fmt.Errorf("image %s: %w", s.Ref, err))
	}
	if err := bw.Flush(); err != nil {
		lf.Close()
		return fail(fmt.Errorf("image layer: %w", err))
	}
	if err := lf.Close(); err != nil {
		return fail(fmt.Errorf("image layer: %w", err))
	}
	var lopts []tarball.LayerOption
	if oci {
		lopts = append(lopts, tarball.WithMediaType(types.OCILayer))
	}
	layer, err := tarball.LayerFromFile(lf.Name(), lopts...)
	if err != nil {
		return fail(fmt.Errorf("image layer: %w", err))
	}
	osName, arch := s.OS, s.Arch
	if osName == "" {
		osName = "linux"
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	base := empty.Image
	if oci {
		base = mutate.MediaType(mutate.ConfigMediaType(base, types.OCIConfigJSON), types.OCIManifestSchema1)
	}
	img, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: arch,
		OS:           osName,
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: s.Entrypoint, Cmd: s.Cmd, Env: s.Env, User: s.User, WorkingDir: s.WorkingDir, Labels: s.Labels,
		},
	})
	if err != nil {
		return fail(fmt.Errorf("image config: %w", err))
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: layerMediaType(oci), History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "rdmanet internal/image: " + strconv.Itoa(len(entries)) + " entries",
	}})
	if err != nil {
		return fail(fmt.Errorf("image layer: %w", err))
	}
	return img, len(entries), cleanup, nil
}

func layerMediaType(oci bool) types.MediaType {
	if oci {
		return types.OCILayer
	}
	return ""
}
