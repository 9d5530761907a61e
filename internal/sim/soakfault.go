package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// soakStateFSSize bounds the tmpfs the soak's work dir lives on, so the
// state-full fault can fill it.
const soakStateFSSize = 256 << 20

// stateFS is the soak's work dir: a tmpfs of its own.
type stateFS struct {
	dir string
}

func mountStateFS(dir string) (*stateFS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("soak work dir: %w", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		return nil, fmt.Errorf("soak work dir %s must be empty (a soak left it? unmount it with `umount %s`): %v", dir, dir, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", soakStateFSSize)); err != nil {
		return nil, fmt.Errorf("mount a tmpfs on the soak work dir %s: %w", dir, err)
	}
	return &stateFS{dir: dir}, nil
}

func (f *stateFS) unmount() error {
	if err := unix.Unmount(f.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount the soak work dir %s: %w", f.dir, err)
	}
	return nil
}

// fill writes a filler file until the filesystem is full; the returned
// func removes it.
func (f *stateFS) fill() (func(), error) {
	p := filepath.Join(f.dir, "filler")
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := fh.Write(buf); err != nil {
			break // ENOSPC
		}
	}
	// the last partial pages too
	for {
		if _, err := fh.Write(buf[:512]); err != nil {
			break
		}
	}
	fh.Close()
	return func() { _ = os.Remove(p) }, nil
}

// readOnly bind-mounts each dir read-only over itself; the returned func
// unmounts them.
func readOnly(dirs ...string) (func(), error) {
	var done []string
	undo := func() {
		for _, d := range done {
			_ = unix.Unmount(d, unix.MNT_DETACH)
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			undo()
			return nil, err
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND, ""); err != nil {
			undo()
			return nil, fmt.Errorf("bind mount %s: %w", d, err)
		}
		done = append(done, d)
		if err := unix.Mount("", d, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			undo()
			return nil, fmt.Errorf("remount %s read-only: %w", d, err)
		}
	}
	return undo, nil
}

// strike runs the round's node-wide fault during one phase ("add" or
// "del"): at a random moment of it, and held for a while. The returned
// func waits for the fault to be over (daemons and agents running again,
// filesystems writable) before the phase's check.
func (s *soak) strike(fault, phase string) func() {
	est := s.estAdd
	if phase == "del" {
		est = s.estDel
	}
	var act func() error
	switch {
	case fault == FaultDaemonKillAdd && phase == "add", fault == FaultDaemonKillDel && phase == "del":
		act = func() error {
			for _, d := range s.daemons {
				d.kill()
			}
			time.Sleep(s.randDur(300 * time.Millisecond))
			for _, d := range s.daemons {
				if err := d.start(); err != nil {
					return err
				}
			}
			return nil
		}
	case fault == FaultAgentRestart && phase == "add":
		act = func() error {
			for _, n := range s.nodes {
				n.stopAgent()
				<-n.agentDone
				time.Sleep(s.randDur(200 * time.Millisecond))
				if err := n.startAgent(); err != nil {
					return err
				}
			}
			return nil
		}
	case fault == FaultKubeletRestart && phase == "add":
		act = func() error {
			for _, n := range s.nodes {
				if err := n.kubelet.restart(s.randDur(200 * time.Millisecond)); err != nil {
					return err
				}
			}
			return nil
		}
	case fault == FaultStateReadOnly && phase == "add":
		act = func() error {
			var dirs []string
			for _, n := range s.nodes {
				dirs = append(dirs, filepath.Join(n.dir, "cni-state"), filepath.Join(n.dir, "ipam"), filepath.Join(n.dir, "rdmanet"))
			}
			undo, err := readOnly(dirs...)
			if err != nil {
				return err
			}
			time.Sleep(300*time.Millisecond + s.randDur(500*time.Millisecond))
			undo()
			return nil
		}
	case fault == FaultStateFull && phase == "add":
		act = func() error {
			undo, err := s.fs.fill()
			if err != nil {
				return err
			}
			time.Sleep(300*time.Millisecond + s.randDur(500*time.Millisecond))
			undo()
			return nil
		}
	default:
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(s.randDur(est * 2 / 3))
		s.count(func(r *SoakReport) { r.Faults++; r.PerFault[fault].Injected++ })
		if err := act(); err != nil {
			s.problem(fault, "injecting the fault: %v", err)
		}
	}()
	return wg.Wait
}
