package pairprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Datagram magics: a probe (echoed verbatim) and a client's goodbye.
var (
	magicProbe = []byte("RDMAPRB1")
	magicBye   = []byte("RDMABYE1")
)

// Responder is a bound echo responder; Serve runs it.
type Responder struct {
	cfg   ServeConfig
	conns []net.PacketConn
}

// Listen binds the responder's sockets (in the calling thread's network
// namespace: tests call it inside the pod stand-in's netns).
func Listen(cfg ServeConfig) (*Responder, error) {
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	addrs := cfg.Listen
	if len(addrs) == 0 {
		addrs = []string{"0.0.0.0"}
	}
	r := &Responder{cfg: cfg}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil {
			r.Close()
			return nil, fmt.Errorf("serve config: listen address %q is not an IP address", a)
		}
		network := "udp4"
		if ip.To4() == nil {
			network = "udp6"
		}
		lc := net.ListenConfig{Control: dfControl("", nil)}
		c, err := lc.ListenPacket(context.Background(), network, net.JoinHostPort(a, strconv.Itoa(cfg.Port)))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("responder: listen on %s port %d: %w (fix: another process of the pod uses the port: pass --probe-port)", a, cfg.Port, err)
		}
		r.conns = append(r.conns, c)
	}
	return r, nil
}

// Addrs are the bound addresses.
func (r *Responder) Addrs() []string {
	var out []string
	for _, c := range r.conns {
		out = append(out, c.LocalAddr().String())
	}
	return out
}

// Close closes the sockets.
func (r *Responder) Close() {
	for _, c := range r.conns {
		c.Close()
	}
}

// Serve echoes probes until Expect distinct peers said goodbye, MaxWait
// passed or ctx ends. It closes the sockets.
func (r *Responder) Serve(ctx context.Context) error {
	defer r.Close()
	if r.cfg.MaxWaitMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ms(r.cfg.MaxWaitMS))
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		byes = map[string]bool{}
		wg   sync.WaitGroup
	)
	for _, c := range r.conns {
		wg.Add(1)
		go func(c net.PacketConn) {
			defer wg.Done()
			buf := make([]byte, 65536)
			for ctx.Err() == nil {
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				n, from, err := c.ReadFrom(buf)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						continue
					}
					if ctx.Err() != nil {
						return
					}
					continue
				}
				switch {
				case bytes.HasPrefix(buf[:n], magicProbe):
					// A reply larger than this side's MTU fails with
					// EMSGSIZE (DF): the client sees the size lost.
					_, _ = c.WriteTo(buf[:n], from)
				case bytes.HasPrefix(buf[:n], magicBye):
					mu.Lock()
					byes[string(buf[len(magicBye):n])] = true
					done := r.cfg.Expect > 0 && len(byes) >= r.cfg.Expect
					mu.Unlock()
					if done {
						cancel()
						return
					}
				}
			}
		}(c)
	}
	wg.Wait()
	return nil
}

// Serve is `rdmanet-probe serve`: it binds, prints a ready line, echoes
// until done and prints a done line. A bind failure is printed as an error
// line and returned.
func Serve(ctx context.Context, cfg ServeConfig, out *Output) error {
	r, err := Listen(cfg)
	if err != nil {
		out.Emit(Line{Kind: "error", Self: cfg.Self, Error: err.Error()})
		return err
	}
	out.Emit(Line{Kind: "ready", Self: cfg.Self, Listen: r.Addrs()})
	err = r.Serve(ctx)
	out.Emit(Line{Kind: "done", Self: cfg.Self})
	return err
}
