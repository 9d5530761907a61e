package chart

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Package writes the chart directory dir as a Helm chart archive
// <outDir>/<name>-<version>.tgz, as `helm package` lays it out (every file
// Helm's loader keeps, .helmignore applied, under <name>/), reproducibly:
// files sorted, owner 0, mode 0644, every time created, no gzip name or
// time. It refuses a chart that `helm lint --strict` refuses. It returns
// the archive's path.
func Package(dir, outDir string, created time.Time) (string, error) {
	if err := Lint(dir, nil); err != nil {
		return "", err
	}
	c, err := Load(dir)
	if err != nil {
		return "", err
	}
	name := c.Metadata.Name
	files := map[string][]byte{}
	for _, f := range c.Raw {
		p := path.Clean(filepath.ToSlash(f.Name))
		if strings.HasPrefix(p, "../") || path.IsAbs(p) {
			return "", fmt.Errorf("chart %s: file %q outside the chart", dir, f.Name)
		}
		files[p] = f.Data
	}
	if _, ok := files["Chart.yaml"]; !ok {
		return "", fmt.Errorf("chart %s: no Chart.yaml among its files", dir)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(outDir, fmt.Sprintf("%s-%s.tgz", name, c.Metadata.Version))
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriter(f)
	zw, err := gzip.NewWriterLevel(bw, gzip.BestCompression)
	if err != nil {
		f.Close()
		return "", err
	}
	tw := tar.NewWriter(zw)
	mtime := created.UTC().Truncate(time.Second)
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	}) {
		data := files[p]
		hdr := &tar.Header{Name: name + "/" + p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			f.Close()
			return "", err
		}
	}
	for _, c := range []interface{ Close() error }{tw, zw} {
		if err := c.Close(); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}
