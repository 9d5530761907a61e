// Package docs keeps the front door and the documents complete: the README
// stays small and lists every shipped binary and image, docs/README.md
// indexes every document, and every relative link resolves.
package docs

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/rdmanet/rdmanet/internal/image"
)

const root = "../.."

// maxReadme is the README's budget: a newcomer reads it in five minutes.
const maxReadme = 10 * 1024

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadmeSize(t *testing.T) {
	if n := len(read(t, "README.md")); n > maxReadme {
		t.Errorf("README.md is %d bytes, over its budget of %d: move detail to a document under docs/ and link it", n, maxReadme)
	}
}

// tableNames returns the backticked names in the first cell of the rows of
// every table of the section that starts with heading.
func tableNames(text, heading string) []string {
	var names []string
	in := false
	cell := regexp.MustCompile("^\\| `([^`]+)`")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.TrimSpace(line) == heading
			continue
		}
		if m := cell.FindStringSubmatch(line); in && m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

func TestReadmeListsEveryBinaryAndImage(t *testing.T) {
	readme := read(t, "README.md")
	listed := tableNames(readme, "## What ships")
	if len(listed) == 0 {
		t.Fatal(`README.md has no table rows under "## What ships"`)
	}
	cmds, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range cmds {
		if c.IsDir() {
			want = append(want, c.Name())
		}
	}
	// The images: the rdmanet image ships every cmd/* binary; the test
	// images ship one test program each.
	want = append(want,
		image.Repository+":<VERSION>", image.Repository+":<VERSION>-sim",
		image.PauseRef, image.TestboxRef)
	for _, w := range want {
		t.Run(w, func(t *testing.T) {
			if !slices.Contains(listed, w) {
				t.Errorf("README.md's \"What ships\" tables have no row for `%s`: add one with its role", w)
			}
		})
	}
	for _, prog := range []string{image.PausePackage, image.RendezvousPackage} {
		name, dir := path.Base(prog), strings.TrimPrefix(prog, "github.com/rdmanet/rdmanet/")
		if !strings.Contains(readme, "`"+name+"` (`"+dir+"`)") {
			t.Errorf("README.md does not name the test image program `%s` (`%s`)", name, dir)
		}
	}
	for _, l := range listed {
		if !slices.Contains(want, l) {
			t.Errorf("README.md lists `%s`, which is neither a cmd/* directory nor an image: remove the row or fix the name", l)
		}
	}
}

func TestDocsIndexListsEveryDocument(t *testing.T) {
	index := read(t, "docs/README.md")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 2 {
		t.Fatalf("found %d documents under docs/", len(docs))
	}
	for _, d := range docs {
		name := filepath.Base(d)
		if name == "README.md" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(index, "]("+name+")") {
				t.Errorf("docs/README.md does not link %s: add a line with what it is for", name)
			}
		})
	}
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		s := slug(strings.TrimLeft(line, "#"))
		if n := seen[s]; n > 0 {
			out[s+"-"+string(rune('0'+n))] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// links returns the link targets outside code blocks and code spans.
func links(text string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		// drop code spans
		var b bytes.Buffer
		inCode := false
		for _, r := range line {
			if r == '`' {
				inCode = !inCode
				continue
			}
			if !inCode {
				b.WriteRune(r)
			}
		}
		for _, m := range link.FindAllStringSubmatch(b.String(), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func TestRelativeLinksResolve(t *testing.T) {
	files := []string{"README.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			for _, l := range links(read(t, f)) {
				if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
					continue
				}
				target, frag, _ := strings.Cut(l, "#")
				rel := f
				if target != "" {
					rel = filepath.Join(filepath.Dir(f), target)
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						t.Errorf("%s links %s: %s does not exist", f, l, rel)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				if !anchors(read(t, rel))[frag] {
					t.Errorf("%s links %s: %s has no heading with anchor #%s", f, l, rel, frag)
				}
			}
		})
	}
}
