package chart

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPackage: the chart archive is the same bytes from the same chart and
// time, Helm's loader reads it, helm lint passes on it, and it renders the
// same objects as the directory.
func TestPackage(t *testing.T) {
	created := time.Unix(1700000000, 0)
	a, err := Package(chartDir(t), t.TempDir(), created)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Package(chartDir(t), t.TempDir(), created)
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ab) == 0 || !bytes.Equal(ab, bb) {
		t.Fatalf("two packages of one chart differ (%d and %d bytes)", len(ab), len(bb))
	}
	c, err := Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(a, "/rdmanet-"+c.Metadata.Version+".tgz") {
		t.Errorf("archive %s, want rdmanet-<version>.tgz", a)
	}
	if err := Lint(a, nil); err != nil {
		t.Fatal(err)
	}
	fromDir := render(t, nil)
	fromArchive, err := Render(a, Namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff("directory", fromDir, "archive", fromArchive); len(d) > 0 {
		t.Fatalf("the archive renders other objects than the directory:\n%s", strings.Join(d, "\n"))
	}
}
