package forward

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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

// Run runs bin with args, this process's environment, stdin and stdout/
// stderr, and exits with bin's exit status when bin fails (its error JSON
// is already on stdout). It returns only when bin succeeded, or with the
// error of a bin that could not be started.
func Run(bin string, args []string, stdin io.Reader) error {
	c := exec.Command(bin, args...)
	c.Stdin = stdin
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	c.Env = os.Environ()
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Exited() {
			os.Exit(st.ExitStatus())
		}
		os.Exit(1)
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	return nil
}
