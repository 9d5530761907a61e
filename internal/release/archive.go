// Package release assembles rdmanet's release (make release, docs/release.md):
// reproducible archives of the binaries per architecture, kubectl-rdma's
// krew plugin archives and manifest, the image index archive, the chart,
// an SBOM per image, and SHA256SUMS over all of them.
package release

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File is one entry of an archive: Name inside it, Source on disk, Mode.
type File struct {
	Name   string
	Source string
	Mode   int64
}

// TarGz writes a .tar.gz of files (sorted by name) under dir/ (no
// directory entries), every entry owned by 0:0 and stamped mtime, gzip
// without name or time: the same inputs give the same bytes.
func TarGz(out, dir string, files []File, mtime time.Time) error {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, err := gzip.NewWriterLevel(bw, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	tw := tar.NewWriter(zw)
	for _, fl := range files {
		if err := addFile(tw, dir, fl, mtime.UTC().Truncate(time.Second)); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", out, err)
		}
	}
	for _, c := range []io.Closer{tw, zw} {
		if err := c.Close(); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func addFile(tw *tar.Writer, dir string, fl File, mtime time.Time) error {
	src, err := os.Open(fl.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	mode := fl.Mode
	if mode == 0 {
		mode = 0o644
	}
	name := fl.Name
	if dir != "" {
		name = dir + "/" + name
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: st.Size(), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.Copy(tw, src)
	if err != nil {
		return err
	}
	if n != st.Size() {
		return fmt.Errorf("%s changed size while archived", fl.Source)
	}
	return nil
}

// SHA256File is the hex SHA-256 of a file.
func SHA256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteSHA256Sums writes dir/SHA256SUMS over every other regular file of
// dir, sorted by name, in sha256sum's format ("<hex>  <name>"), so that
// `sha256sum -c SHA256SUMS` checks them.
func WriteSHA256Sums(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "SHA256SUMS" {
			continue
		}
		sum, err := SHA256File(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
