// rdmanet-daemon --probe: is the daemon answering on its socket?

package daemonclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Probe dials the unix socket at path, closes its write side without a
// request and waits for the daemon's answer (it answers an empty request
// with a decoding error, so no CNI call is made and nothing is logged).
// A socket file left behind by a dead daemon fails the dial.
func Probe(path string, timeout time.Duration) error {
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("daemon socket %s: %w", path, err)
	}
	if st.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("daemon socket %s is not a socket (%s)", path, st.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return fmt.Errorf("daemon socket %s: %w", path, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if uc, ok := c.(*net.UnixConn); ok {
		if err := uc.CloseWrite(); err != nil {
			return fmt.Errorf("daemon socket %s: %w", path, err)
		}
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("daemon socket %s: closed without an answer", path)
		}
		return fmt.Errorf("daemon socket %s: no answer: %w", path, err)
	}
	return nil
}
