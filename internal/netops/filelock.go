package netops

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// FileLock is an exclusive flock(2) on a lock file. It stays correct when a
// holder removes the file (UnlockAndRemove): a waiter that wakes up on a
// removed inode retries on the new file.
type FileLock struct {
	f    *os.File
	path string
}

// LockFile blocks until it holds an exclusive lock on path, creating the
// file (and its directory) when needed.
func LockFile(path string) (*FileLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := flock(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		var held, now unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &held); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := unix.Stat(path, &now); err == nil && now.Ino == held.Ino && now.Dev == held.Dev {
			return &FileLock{f: f, path: path}, nil
		}
		f.Close() // the holder removed the file while we waited: retry on the new one
	}
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}

// Path is the lock file's path.
func (l *FileLock) Path() string { return l.path }

// Unlock releases the lock and keeps the file.
func (l *FileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// UnlockAndRemove removes the lock file, then releases the lock.
func (l *FileLock) UnlockAndRemove() error {
	if l == nil || l.f == nil {
		return nil
	}
	rmErr := os.Remove(l.path)
	if os.IsNotExist(rmErr) {
		rmErr = nil
	}
	if err := l.Unlock(); err != nil {
		return err
	}
	if rmErr != nil {
		return fmt.Errorf("remove lock file: %w", rmErr)
	}
	return nil
}

// WriteFileAtomic writes data to path through a temporary file, fsync and
// rename, so readers (and a crash) see the old or the new content, never a
// torn one.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm, true)
}

// sync is ignored: fsutil.WriteFileAtomic always fsyncs the file and its directory.
func writeFileAtomic(path string, data []byte, perm os.FileMode, sync bool) error {
	return fsutil.WriteFileAtomic(path, data, perm)
}
