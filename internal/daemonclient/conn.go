package daemonclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ErrNotSent wraps the errors of an Exchange that sent nothing (no daemon
// listening, or the connection could not be set up): the caller may run the
// call itself without running it twice.
var ErrNotSent = errors.New("request not sent")

// Exchange is one call of the client side (the shim, a forwarding plugin):
// dial the unix socket, write req, close the write side, read one answer
// into resp, all within wait. An error wrapping ErrNotSent means the daemon
// never got the request; any other error means it may have run the call.
func Exchange(socket string, dial, wait time.Duration, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%w: encode request: %v", ErrNotSent, err)
	}
	c, err := net.DialTimeout("unix", socket, dial)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(wait)); err != nil {
		return fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	if _, err := conn.Write(body); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := conn.CloseWrite(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return Read(conn, resp)
}

// Answer is one call of the server side (the daemon's sockets): read one
// request into req within readTimeout (the client writes it at once), pass
// the read error (nil, or why the request is unusable) to handle, and write
// handle's response back. A request over MaxMessage is drained first, so
// the client reads the answer instead of a reset. It returns the error of
// the write: the client left before the answer.
func Answer(c net.Conn, readTimeout time.Duration, req any, handle func(readErr error) any) error {
	_ = c.SetReadDeadline(time.Now().Add(readTimeout))
	err := Read(c, req)
	if errors.Is(err, ErrTooLarge) {
		_, _ = io.Copy(io.Discard, c) // bounded by the read deadline
	}
	// the call runs to its own deadline, not the read's
	_ = c.SetReadDeadline(time.Time{})
	b, merr := json.Marshal(handle(err))
	if merr != nil {
		return fmt.Errorf("encode response: %w", merr)
	}
	_ = c.SetWriteDeadline(time.Now().Add(readTimeout))
	_, werr := c.Write(b)
	return werr
}
