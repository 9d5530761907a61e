package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// syncCall is what a recording fsync saw when it was called.
type syncCall struct {
	kind    string // "file" or "dir"
	name    string // base name of the synced file or directory
	content string // content of the synced file (kind "file")
	target  string // content of the target path at that moment ("" when absent)
}

// recordingSync fsyncs for real and records every call; failOn makes the
// call of that kind fail instead.
func recordingSync(t *testing.T, target string, calls *[]syncCall, failOn string) func(*os.File) error {
	return func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			t.Fatalf("stat synced file: %v", err)
		}
		c := syncCall{kind: "file", name: filepath.Base(f.Name())}
		if fi.IsDir() {
			c.kind = "dir"
		} else {
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatalf("read synced file: %v", err)
			}
			c.content = string(b)
		}
		if b, err := os.ReadFile(target); err == nil {
			c.target = string(b)
		}
		*calls = append(*calls, c)
		if c.kind == failOn {
			return errInjected
		}
		return f.Sync()
	}
}

var errInjected = errors.New("injected fsync failure")

func TestWriteFileAtomic(t *testing.T) {
	tests := []struct {
		name string
		old  string // existing content; "" = no file
		perm os.FileMode
		// failOn makes the fsync of "file" or "dir" fail.
		failOn string
		// want: the error wraps errInjected; content: the file afterwards.
		wantErr bool
		content string
	}{
		{name: "new file", perm: 0o600, content: "new"},
		{name: "replace read-only", old: "old", perm: 0o444, content: "new"},
		{name: "file fsync fails: old file intact", old: "old", perm: 0o600, failOn: "file", wantErr: true, content: "old"},
		{name: "file fsync fails: no file created", perm: 0o600, failOn: "file", wantErr: true},
		{name: "directory fsync fails after the rename", old: "old", perm: 0o600, failOn: "dir", wantErr: true, content: "new"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sub")
			p := filepath.Join(dir, "f.json")
			if tc.old != "" {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var calls []syncCall
			err := writeFileAtomic(p, []byte("new"), tc.perm, recordingSync(t, p, &calls, tc.failOn), StaleTempAge)
			if tc.wantErr != errors.Is(err, errInjected) {
				t.Fatalf("error %v, want injected failure: %t", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
			b, readErr := os.ReadFile(p)
			if got := string(b); got != tc.content || (tc.content == "") != errors.Is(readErr, os.ErrNotExist) {
				t.Fatalf("content %q (%v), want %q", got, readErr, tc.content)
			}
			if tc.content == "new" {
				if fi, _ := os.Stat(p); fi.Mode().Perm() != tc.perm {
					t.Errorf("perm %v, want %v", fi.Mode().Perm(), tc.perm)
				}
			}
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if want := []string{"f.json"}; tc.content == "" && len(names) != 0 || tc.content != "" && !slices.Equal(names, want) {
				t.Errorf("directory holds %v, want only the target (no temporary file)", names)
			}

			// The file is synced with the new content before it gets the
			// name; the directory after the rename.
			if len(calls) == 0 || calls[0].kind != "file" || calls[0].content != "new" || calls[0].target != tc.old ||
				!strings.HasPrefix(calls[0].name, ".f.json.tmp") {
				t.Fatalf("first fsync %+v, want the temporary file holding the new content while the target still holds %q", calls, tc.old)
			}
			if tc.failOn == "file" {
				if len(calls) != 1 {
					t.Errorf("fsyncs %+v after a failed file fsync, want none", calls[1:])
				}
				return
			}
			if len(calls) != 2 || calls[1].kind != "dir" || calls[1].name != "sub" || calls[1].target != "new" {
				t.Errorf("fsyncs %+v, want the file, then directory sub after the rename", calls)
			}
		})
	}
}

func TestWriteFileAtomicFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) (path string, check func(t *testing.T))
	}{
		{name: "target is a directory: rename fails, no temporary file", setup: func(t *testing.T) (string, func(*testing.T)) {
			dir := t.TempDir()
			p := filepath.Join(dir, "state")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			return p, func(t *testing.T) {
				ents, _ := os.ReadDir(dir)
				if len(ents) != 1 || !ents[0].IsDir() {
					t.Errorf("directory holds %v, want only the untouched target", ents)
				}
			}
		}},
		{name: "parent is a file", setup: func(t *testing.T) (string, func(*testing.T)) {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(f, "x"), func(t *testing.T) {
				if b, _ := os.ReadFile(f); string(b) != "x" {
					t.Errorf("parent file changed to %q", b)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, check := tc.setup(t)
			err := WriteFileAtomic(p, []byte("new"), 0o600)
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v, want one naming %s", err, p)
			}
			check(t)
		})
	}
}

func TestPrivateDir(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, p string)
		want    os.FileMode
		wantErr string
	}{
		{name: "missing, with missing parents", setup: func(*testing.T, string) {}, want: 0o700},
		{name: "existing 0755 is tightened", setup: func(t *testing.T, p string) { mkdir(t, p, 0o755) }, want: 0o700},
		{name: "existing 0777 is tightened", setup: func(t *testing.T, p string) { mkdir(t, p, 0o777) }, want: 0o700},
		{name: "existing 0700 unchanged", setup: func(t *testing.T, p string) { mkdir(t, p, 0o700) }, want: 0o700},
		{name: "existing 0500 stays (owner bits are kept)", setup: func(t *testing.T, p string) { mkdir(t, p, 0o500) }, want: 0o500},
		{name: "a file is refused", setup: func(t *testing.T, p string) {
			mkdir(t, filepath.Dir(p), 0o700)
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "a", "b")
			tc.setup(t, p)
			err := PrivateDir(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("error %v, want one naming %s and %q", err, p, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.want {
				t.Errorf("mode %04o, want %04o", fi.Mode().Perm(), tc.want)
			}
		})
	}
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFileAtomicRemovesStaleTemps (found by the soak: a daemon
// SIGKILLed mid-write, or a state dir gone read-only, left a temporary file
// behind for good): a successful write removes its path's temporary files
// older than StaleTempAge, and leaves younger ones (a concurrent writer's)
// and other files' alone.
func TestWriteFileAtomicRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a[1].json")
	old := time.Now().Add(-2 * StaleTempAge)
	files := []struct {
		name     string
		age      time.Time
		wantGone bool
	}{
		{name: ".a[1].json.tmp123", age: old, wantGone: true},
		{name: ".a[1].json.tmp456", age: time.Now()},
		{name: ".b.json.tmp789", age: old},
		{name: "a[1].json.tmp000", age: old},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.age, f.age); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFileAtomic(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if gone := os.IsNotExist(err); gone != f.wantGone {
			t.Errorf("%s: gone %v, want %v", f.name, gone, f.wantGone)
		}
	}
}

// TestReplaceFile: the cache writer replaces the content whole, with the
// mode asked, and leaves no temporary file (it only skips the fsyncs).
func TestReplaceFile(t *testing.T) {
	for _, old := range []string{"", "old content, longer than the new"} {
		t.Run(fmt.Sprintf("old=%q", old), func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "c.json")
			if old != "" {
				if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := ReplaceFile(p, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(p); err != nil || string(b) != "new" {
				t.Fatalf("content %q (%v), want new", b, err)
			}
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
				t.Errorf("perm %v, want 0600", fi.Mode().Perm())
			}
			if tmp := TempFiles(p); len(tmp) != 0 {
				t.Errorf("temporary files left: %v", tmp)
			}
		})
	}
}

// TestRemoveTemps: every temporary file of the path goes, however young;
// the path itself and other files' temporaries stay.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0000:41:00.3.json")
	keep := []string{"0000:41:00.3.json", ".0000:41:00.4.json.tmp1", "other"}
	for _, f := range append([]string{".0000:41:00.3.json.tmp1", ".0000:41:00.3.json.tmp22"}, keep...) {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveTemps(p); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(keep)
	if !slices.Equal(got, keep) {
		t.Errorf("directory holds %v, want %v", got, keep)
	}
}

// TestWriteFileAtomicLocked: a locked writer's write takes every temporary
// file of the path with it, however young; WriteFileAtomic keeps a young one
// (it may be a concurrent writer's).
func TestWriteFileAtomicLocked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(string, []byte, os.FileMode) error
		left  int
	}{
		{name: "locked writer", write: WriteFileAtomicLocked, left: 0},
		{name: "unlocked writer", write: WriteFileAtomic, left: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "r.json")
			if err := os.WriteFile(filepath.Join(filepath.Dir(p), ".r.json.tmp42"), []byte("cut short"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(p, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := TempFiles(p); len(got) != tc.left {
				t.Errorf("temporary files %v, want %d", got, tc.left)
			}
		})
	}
}
