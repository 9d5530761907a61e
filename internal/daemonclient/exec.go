package daemonclient

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Find looks for the binary name next to this executable (symlinks
// resolved: a "whereabouts" link finds what sits next to rdmanet-ipam),
// then in the CNI_PATH directories. It returns the path, or an error that
// names the directories searched.
func Find(name, cniPath string) (string, error) {
	var dirs []string
	if self, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(self))
	}
	dirs = append(dirs, filepath.SplitList(cniPath)...)
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed next to %s or on CNI_PATH (searched %v); fix: install %s in the CNI bin directory (rdmanet-install does)", name, filepath.Base(os.Args[0]), dirs, name)
}

// Exec replaces this process with bin run with args, this process's
// environment and open stdout/stderr: the runtime that exec'd this plugin
// waits for bin's answer and exit status as if it had exec'd bin itself
// (same pid, signals reach bin, no second process to wait on). With stdin
// not nil, bin reads stdin as its standard input (the caller read the
// original); with nil it inherits this process's. Exec returns only with
// the error of a bin that could not be started.
func Exec(bin string, args []string, stdin []byte) error {
	if stdin != nil {
		if err := setStdin(bytes.NewReader(stdin)); err != nil {
			return err
		}
	}
	err := syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	return fmt.Errorf("exec %s: %w", bin, err)
}

// setStdin makes file descriptor 0 (and os.Stdin) read what r gives, from
// an in-memory file: unlike a pipe it needs no writer, so it survives exec
// and holds configs of any size.
func setStdin(r io.Reader) error {
	fd, err := unix.MemfdCreate("cni-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("restore stdin: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "cni-stdin")
	if fd != 0 {
		defer f.Close() // fd 0 gets its own descriptor of the file below
	}
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("restore stdin: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("restore stdin: %w", err)
	}
	if fd == 0 { // stdin was closed and the memfd took its number
		_, err = unix.FcntlInt(0, unix.F_SETFD, 0)
	} else {
		err = unix.Dup3(fd, 0, 0) // the new descriptor is not close-on-exec
	}
	if err != nil {
		return fmt.Errorf("restore stdin: %w", err)
	}
	os.Stdin = os.NewFile(0, "/dev/stdin")
	return nil
}
