// Package fsutil holds the one file-writing primitive every state-keeping
// component shares: an atomic, durable replace that readers and crashes
// never see half-done.
package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// file is removed. A failure of the directory fsync is returned too: the new
// content is in place, but its durability is not known.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm, syncFile)
}

// syncFile is the production fsync.
func syncFile(f *os.File) error { return f.Sync() }

// writeFileAtomic is WriteFileAtomic with the fsync injectable, so tests can
// prove both fsyncs happen, in order, and fail them.
func writeFileAtomic(path string, data []byte, perm os.FileMode, sync func(*os.File) error) (err error) {
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
