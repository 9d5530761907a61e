package lint

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files and docs/lint-rules.md")

const seedsDir = "../../examples/seeds"

// TestSeedGolden lints every seed example directory and compares the JSON
// and text reports with testdata/golden.
func TestSeedGolden(t *testing.T) {
	dirs, err := os.ReadDir(seedsDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		n++
		t.Run(d.Name(), func(t *testing.T) {
			objs, err := manifest.ReadPaths([]string{filepath.Join(seedsDir, d.Name())}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Lint(objs)
			if err != nil {
				t.Fatal(err)
			}
			var js, txt bytes.Buffer
			if err := res.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := res.WriteText(&txt, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", d.Name()+".json"), js.Bytes())
			golden(t, filepath.Join("testdata", "golden", d.Name()+".txt"), txt.Bytes())
		})
	}
	if n < 6 {
		t.Fatalf("found %d seed example directories, want at least 6", n)
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/lint -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (run go test ./internal/lint -update and review the diff)\n--- got ---\n%s", path, got)
	}
}

// TestRuleCatalogueDoc keeps docs/lint-rules.md in sync with the catalogue.
func TestRuleCatalogueDoc(t *testing.T) {
	golden(t, "../../docs/lint-rules.md", []byte(RulesMarkdown()))
}

func TestSeedExpectations(t *testing.T) {
	// Facts about the seeds that must hold whatever the golden files say.
	for _, tc := range []struct {
		dir, mode string
		rules     []string // must be reported
		absent    []string // must not be reported
	}{
		// The seed's Job keeps only the network/NCCL fields: no IPC_LOCK.
		{dir: "exclusive", mode: ModeExclusive, rules: []string{"RDMA060"}, absent: []string{"RDMA010", "RDMA011", "RDMA012", "RDMA020", "RDMA033", "RDMA035", "RDMA080", "RDMA081", "RDMA082"}},
		{dir: "hostnetwork", mode: ModeHost, rules: []string{"RDMA070", "RDMA051"}, absent: []string{"RDMA050", "RDMA060", "RDMA081"}},
		{dir: "shared-nvidia-network-operator", absent: []string{"RDMA038", "RDMA039", "RDMA040", "RDMA003"}},
		{dir: "vf-annotation-snippets", mode: ModeExclusive, absent: []string{"RDMA073", "RDMA060"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			objs, err := manifest.ReadPaths([]string{filepath.Join(seedsDir, tc.dir)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Lint(objs)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, f := range res.Findings {
				got[f.Rule] = true
			}
			for _, r := range tc.rules {
				if !got[r] {
					t.Errorf("want %s:\n%s", r, dump(res))
				}
			}
			for _, r := range tc.absent {
				if got[r] {
					t.Errorf("do not want %s:\n%s", r, dump(res))
				}
			}
			for _, w := range res.Workloads {
				if tc.mode != "" && w.Mode != tc.mode {
					t.Errorf("%s mode %s, want %s", w.Name, w.Mode, tc.mode)
				}
			}
		})
	}
}

func TestTextColourOnlyWhenAsked(t *testing.T) {
	res := lintDocs(t, exclusiveSet(with(exclusiveWL, func(w *wlB) { w.c().caps = nil })))
	var plain, colour bytes.Buffer
	if err := res.WriteText(&plain, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteText(&colour, TextOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Bytes(), []byte("\x1b[")) {
		t.Error("plain output has escape codes")
	}
	if !bytes.Contains(colour.Bytes(), []byte("\x1b[31merror")) {
		t.Errorf("coloured output lacks a red error:\n%q", colour.String())
	}
}
