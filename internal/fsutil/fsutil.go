// Package fsutil holds the one file-writing primitive every state-keeping
// component shares: an atomic, durable replace that readers and crashes
// never see half-done.
package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteFileAtomic replaces path with data so that readers, and a crash or
// power loss at any point, see either the old content or the new one, never
// an empty or torn file:
//
//  1. write data to a temporary file in path's directory (the directory is
//     created 0700 when missing), with mode perm;
//  2. fsync the temporary file, so its content is on disk before it gets
//     the name;
//  3. rename it over path;
//  4. fsync the directory, so the rename itself is on disk.
//
// On any failure before the rename, path is untouched and the temporary
// file is removed; one left by a writer that died (SIGKILL, or a file
// system gone read-only before the removal) is removed by the next
// successful write of path once it is StaleTempAge old. A failure of the directory fsync is returned too: the new
// content is in place, but its durability is not known.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm, syncFile, StaleTempAge)
}

// WriteFileAtomicLocked is WriteFileAtomic for a path whose every writer
// holds one lock, which the caller holds (a VF's lock for its record):
// none of the path's temporary files can be a live writer's, so after the
// rename it removes them whatever their age — also those a write that a
// read-only or full file system cut short between create and rename left.
func WriteFileAtomicLocked(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm, syncFile, 0)
}

// ReplaceFile is WriteFileAtomic without the fsyncs: readers see the old
// or the new content whole, never a mix, but after a power loss either (or
// no file) may be there. For node-local caches whose loss or staleness is
// safe by design (a stale entry is checked against the API server before
// it matters); state that must survive uses WriteFileAtomic.
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm, func(*os.File) error { return nil }, StaleTempAge)
}

// syncFile is the production fsync.
func syncFile(f *os.File) error { return f.Sync() }

// writeFileAtomic is WriteFileAtomic with the fsync injectable, so tests can
// prove both fsyncs happen, in order, and fail them.
// After the rename it removes the path's temporary files older than
// staleAge (0: all; its own is renamed away by then).
func writeFileAtomic(path string, data []byte, perm os.FileMode, sync func(*os.File) error, staleAge time.Duration) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close() // may already be closed
			if rmErr := os.Remove(tmp.Name()); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove temporary file: %w", rmErr))
			}
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := sync(tmp); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	removeStaleTemps(path, time.Now().Add(-staleAge))
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open directory for fsync: %w", path, err)
	}
	defer d.Close()
	if err := sync(d); err != nil {
		return fmt.Errorf("write %s: fsync directory %s: %w", path, dir, err)
	}
	return nil
}

// StaleTempAge is how old another writer's temporary file of the same path
// must be before a successful write removes it as left by a crash (no
// write takes that long; a younger one may be a concurrent writer's).
const StaleTempAge = time.Minute

// TempFiles lists the temporary files WriteFileAtomic makes for path
// (".<name>.tmp*" beside it) that exist now: a live writer's, or ones a
// writer that died left.
func TempFiles(path string) []string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	dir, base := filepath.Split(path)
	matches, _ := filepath.Glob(filepath.Join(dir, "."+r.Replace(base)+".tmp*"))
	return matches
}

// RemoveTemps removes every temporary file WriteFileAtomic made for path,
// whatever its age, and returns the first failure. Only for a caller that
// holds a lock every writer of path takes (a VF's lock for its record):
// then none of them is a live writer's, and a write a read-only or full
// file system cut short between creating and renaming it leaves nothing
// once the path is next written or removed.
func RemoveTemps(path string) error {
	for _, m := range TempFiles(path) {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove temporary file of %s: %w", path, err)
		}
	}
	return nil
}

// removeStaleTemps removes path's temporary files modified before cutoff.
// Best effort: a failure leaves them for the next write.
func removeStaleTemps(path string, cutoff time.Time) {
	for _, m := range TempFiles(path) {
		if st, err := os.Lstat(m); err == nil && st.Mode().IsRegular() && st.ModTime().Before(cutoff) {
			_ = os.Remove(m)
		}
	}
}

// PrivateDir makes dir a directory only its owner (root) can enter: it is
// created 0700 with its missing parents when absent, and an existing one
// with any group or other permission is tightened to 0700. It is for the
// directories rdmanet owns alone (state caches, pending-DEL records, IPAM
// state, its sockets); a directory shared with other components (kubelet's
// device-plugins dir, the NPWG device-info dir) is only created, never
// changed (use os.MkdirAll with 0700 there).
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("private directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("private directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("private directory %s: not a directory (%s); fix: remove it or point the setting at a directory", dir, fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("private directory %s: tighten mode %04o to 0700: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}
