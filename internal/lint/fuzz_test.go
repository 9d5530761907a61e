package lint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmanet/rdmanet/internal/manifest"
)

// FuzzLint: any input the reader accepts lints without panicking, and every
// finding names a catalogue rule, an object and a message.
func FuzzLint(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/seeds/*/*.yaml")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(yamlOf(f, exclusiveSet(exclusiveWL()))))
	f.Add([]byte(yamlOf(f, sharedSet(sharedWL()))))
	f.Add([]byte(yamlOf(f, hostSet(hostWL()))))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := manifest.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		res, err := Lint(objs)
		if err != nil {
			return
		}
		for _, fd := range res.Findings {
			if _, ok := ruleByID[fd.Rule]; !ok || fd.Object == "" || fd.Message == "" {
				t.Fatalf("bad finding %+v", fd)
			}
		}
	})
}
