package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	v1alpha1 "github.com/rdmanet/rdmanet/api/ipam/v1alpha1"
	"github.com/rdmanet/rdmanet/internal/fsutil"
)

// LocalStore keeps blocks in one JSON file on the node (Dir/blocks.json).
// Every call takes an exclusive flock on Dir/blocks.lock, reads the file,
// and writes it back with fsutil.WriteFileAtomic (temp file, fsync, rename,
// fsync of the directory), so a crash or power loss at any point leaves
// either the old or the new file, never a torn or empty one.
type LocalStore struct {
	Dir string
}

const localFileVersion = 1

type localFile struct {
	Version int                  `json:"version"`
	Serial  uint64               `json:"serial"`
	Blocks  []v1alpha1.IPAMBlock `json:"blocks"`
}

func (s *LocalStore) path() string { return filepath.Join(s.Dir, "blocks.json") }

// FileLock is a Locker over flock(2) on files in Dir.
type FileLock struct {
	Dir string
}

// Lock takes an exclusive flock on Dir/<key>.lock, waiting until ctx ends.
func (l *FileLock) Lock(ctx context.Context, key string) (func(), error) {
	if err := fsutil.PrivateDir(l.Dir); err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: create lock dir %s: %w", l.Dir, err)
	}
	name := filepath.Join(l.Dir, key+".lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: open lock %s: %w", name, err)
	}
	// Try once without blocking (the common, uncontended case), then block
	// in a goroutine so a canceled ctx can give up waiting. If ctx wins, the
	// goroutine releases the lock as soon as it gets it.
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		return func() { _ = unix.Flock(fd, unix.LOCK_UN); _ = f.Close() }, nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("rdmanet-ipam: flock %s: %w", name, err)
	}
	got := make(chan error, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		var err error
		for {
			if err = unix.Flock(fd, unix.LOCK_EX); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if err == nil {
				_ = unix.Flock(fd, unix.LOCK_UN)
			}
			_ = f.Close()
			return
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("rdmanet-ipam: flock %s: %w", name, err)
		}
		return func() { _ = unix.Flock(fd, unix.LOCK_UN); _ = f.Close() }, nil
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case err := <-got: // acquired just now: keep it consistent
			if err == nil {
				_ = unix.Flock(fd, unix.LOCK_UN)
			}
			_ = f.Close()
		default:
			abandoned = true
		}
		return nil, fmt.Errorf("rdmanet-ipam: waiting for lock %s: %w", name, ctx.Err())
	}
}

// update runs fn on the file's content under the file lock and writes the
// result back when fn reports a change.
func (s *LocalStore) update(ctx context.Context, fn func(f *localFile) (changed bool, err error)) error {
	unlock, err := (&FileLock{Dir: s.Dir}).Lock(ctx, "blocks")
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	changed, err := fn(f)
	if err != nil || !changed {
		return err
	}
	return s.write(f)
}

func (s *LocalStore) read() (*localFile, error) {
	data, err := os.ReadFile(s.path())
	if errors.Is(err, os.ErrNotExist) {
		return &localFile{Version: localFileVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: read local store: %w", err)
	}
	var f localFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: local store %s is corrupt (%w); fix: restore it from backup, or delete it after `rdmanet-ipam gc` has no live pods to protect", s.path(), err)
	}
	if f.Version != localFileVersion {
		return nil, fmt.Errorf("rdmanet-ipam: local store %s has version %d, this binary reads %d; fix: use a matching rdmanet-ipam", s.path(), f.Version, localFileVersion)
	}
	return &f, nil
}

func (s *LocalStore) write(f *localFile) error {
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return fmt.Errorf("rdmanet-ipam: encode local store: %w", err)
	}
	if err := fsutil.WriteFileAtomic(s.path(), data, 0o600); err != nil {
		return fmt.Errorf("rdmanet-ipam: local store: %w", err)
	}
	return nil
}

// List implements Store.
func (s *LocalStore) List(ctx context.Context, pool Pool, node string) ([]v1alpha1.IPAMBlock, error) {
	var out []v1alpha1.IPAMBlock
	err := s.update(ctx, func(f *localFile) (bool, error) {
		for i := range f.Blocks {
			if BlockMatches(&f.Blocks[i], pool, node) {
				out = append(out, *f.Blocks[i].DeepCopy())
			}
		}
		return false, nil
	})
	return out, err
}

// Get implements Store.
func (s *LocalStore) Get(ctx context.Context, name string) (*v1alpha1.IPAMBlock, error) {
	var out *v1alpha1.IPAMBlock
	err := s.update(ctx, func(f *localFile) (bool, error) {
		if i := f.index(name); i >= 0 {
			out = f.Blocks[i].DeepCopy()
			return false, nil
		}
		return false, fmt.Errorf("rdmanet-ipam: block %s: %w", name, ErrNotFound)
	})
	return out, err
}

// Create implements Store.
func (s *LocalStore) Create(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	if err := fsutil.PrivateDir(s.Dir); err != nil {
		return nil, fmt.Errorf("rdmanet-ipam: create local store dir: %w", err)
	}
	var out *v1alpha1.IPAMBlock
	err := s.update(ctx, func(f *localFile) (bool, error) {
		if f.index(b.Name) >= 0 {
			return false, fmt.Errorf("rdmanet-ipam: block %s already exists: %w", b.Name, ErrConflict)
		}
		f.Serial++
		out = b.DeepCopy()
		out.ResourceVersion = strconv.FormatUint(f.Serial, 10)
		f.Blocks = append(f.Blocks, *out.DeepCopy())
		return true, nil
	})
	return out, err
}

// Update implements Store.
func (s *LocalStore) Update(ctx context.Context, b *v1alpha1.IPAMBlock) (*v1alpha1.IPAMBlock, error) {
	var out *v1alpha1.IPAMBlock
	err := s.update(ctx, func(f *localFile) (bool, error) {
		i := f.index(b.Name)
		if i < 0 {
			return false, fmt.Errorf("rdmanet-ipam: block %s is gone: %w", b.Name, ErrConflict)
		}
		if f.Blocks[i].ResourceVersion != b.ResourceVersion {
			return false, fmt.Errorf("rdmanet-ipam: block %s changed (version %s, have %s): %w", b.Name, f.Blocks[i].ResourceVersion, b.ResourceVersion, ErrConflict)
		}
		f.Serial++
		out = b.DeepCopy()
		out.ResourceVersion = strconv.FormatUint(f.Serial, 10)
		f.Blocks[i] = *out.DeepCopy()
		return true, nil
	})
	return out, err
}

// Delete implements Store.
func (s *LocalStore) Delete(ctx context.Context, b *v1alpha1.IPAMBlock) error {
	return s.update(ctx, func(f *localFile) (bool, error) {
		i := f.index(b.Name)
		if i < 0 {
			return false, nil
		}
		if b.ResourceVersion != "" && f.Blocks[i].ResourceVersion != b.ResourceVersion {
			return false, fmt.Errorf("rdmanet-ipam: block %s changed: %w", b.Name, ErrConflict)
		}
		f.Blocks = slices.Delete(f.Blocks, i, i+1)
		return true, nil
	})
}

func (f *localFile) index(name string) int {
	return slices.IndexFunc(f.Blocks, func(b v1alpha1.IPAMBlock) bool { return b.Name == name })
}
