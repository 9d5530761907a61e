package pairprobe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"
)

// errLost: no echo within the wait.
var errLost = errors.New("no echo")

// Prober is one target's socket and state.
type Prober struct {
	cfg   *ClientConfig
	res   Result
	conn  *net.UDPConn
	v6    bool
	nonce uint64
	seq   uint64
	buf   []byte
}

// Open prepares every target: it reads the local interface and opens the
// DF socket bound to the source address (and the interface). It runs in the
// calling thread (so in its network namespace); Probe may then run on any.
func Open(cfg ClientConfig) ([]*Prober, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &cfg
	var out []*Prober
	for _, t := range c.Targets {
		p := &Prober{cfg: c, res: Result{Target: t}, nonce: rand.Uint64(), buf: make([]byte, 65536)}
		src, _ := netip.ParseAddr(t.Src)
		p.v6 = !src.Unmap().Is4()
		if ifc, err := net.InterfaceByName(t.Interface); err != nil {
			p.res.Error = fmt.Sprintf("the pod has no interface %s: %v", t.Interface, err)
		} else {
			p.res.LocalMTU = ifc.MTU
			if as, err := ifc.Addrs(); err == nil {
				for _, a := range as {
					if pn, ok := a.(*net.IPNet); ok && pn.IP.Equal(net.ParseIP(t.Src)) {
						p.res.LocalCIDR = pn.String()
					}
				}
			}
			if p.res.LocalCIDR == "" {
				p.res.Error = fmt.Sprintf("interface %s does not have the address %s network-status gives it", t.Interface, t.Src)
			}
		}
		network := "udp4"
		if p.v6 {
			network = "udp6"
		}
		dev := t.Interface
		if p.res.LocalMTU == 0 {
			dev = ""
		}
		d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(t.Src)}, Control: dfControl(dev, &p.res.BoundToDevice)}
		conn, err := d.Dial(network, net.JoinHostPort(t.Dst, strconv.Itoa(c.Port)))
		if err != nil {
			p.res.Error = join(p.res.Error, fmt.Sprintf("open a DF socket from %s to %s: %v", t.Src, t.Dst, err))
		} else {
			p.conn = conn.(*net.UDPConn)
		}
		mtu := t.MTU
		if mtu == 0 {
			mtu = p.res.LocalMTU
		}
		if mtu > 0 {
			p.res.WantDF = PayloadFor(mtu, p.v6)
		}
		out = append(out, p)
	}
	return out, nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// echo sends one probe of size bytes and waits for its echo.
func (p *Prober) echo(size int) (time.Duration, error) {
	if size < 24 {
		size = 24
	}
	p.seq++
	msg := make([]byte, size)
	copy(msg, magicProbe)
	binary.BigEndian.PutUint64(msg[8:], p.nonce)
	binary.BigEndian.PutUint64(msg[16:], p.seq)
	start := time.Now()
	if _, err := p.conn.Write(msg); err != nil {
		return 0, err
	}
	deadline := start.Add(ms(p.cfg.WaitMS))
	for {
		_ = p.conn.SetReadDeadline(deadline)
		n, err := p.conn.Read(p.buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return 0, errLost
			}
			return 0, err
		}
		if n == size && bytes.Equal(p.buf[:24], msg[:24]) {
			return time.Since(start), nil
		}
		// A late echo of an earlier probe: keep waiting.
	}
}

// try sends size up to Attempts times; ok when one is echoed. err is the
// last send/receive error (EMSGSIZE ends the attempts at once).
func (p *Prober) try(size int) (bool, error) {
	var last error
	for range p.cfg.Attempts {
		_, err := p.echo(size)
		if err == nil {
			return true, nil
		}
		last = err
		if isMsgSize(err) {
			break
		}
	}
	return false, last
}

// probe runs the layers for one target: reachable, RTT, largest DF size.
func (p *Prober) probe(ctx context.Context) {
	r := &p.res
	if p.conn == nil {
		return
	}
	// Reachable: a small datagram echoed, retried while the peer's
	// responder may still be starting.
	deadline := time.Now().Add(ms(p.cfg.StartupMS))
	var last error
	refused := false // ICMP is rate limited: remember one port unreachable
	for ctx.Err() == nil && time.Now().Before(deadline) {
		_, err := p.echo(MinPayload)
		if err == nil {
			r.Reachable = true
			break
		}
		last = err
		refused = refused || isRefused(err)
		if !errors.Is(err, errLost) {
			time.Sleep(100 * time.Millisecond) // refused, unreachable: do not spin
		}
	}
	if !r.Reachable {
		why := "no echo"
		switch {
		case last == nil:
		case refused:
			why = "port unreachable: the peer answered, but no responder listens on port " + strconv.Itoa(p.cfg.Port)
		case !errors.Is(last, errLost):
			why = last.Error()
		}
		r.Error = join(r.Error, fmt.Sprintf("%s → %s: %s within %s", r.Src, r.Dst, why, ms(p.cfg.StartupMS)))
		return
	}
	var rtts []time.Duration
	for range p.cfg.Pings {
		if d, err := p.echo(MinPayload); err == nil {
			rtts = append(rtts, d)
		}
	}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		r.RTTMicros = rtts[len(rtts)/2].Microseconds()
	}
	r.MaxDF = MinPayload
	if r.WantDF <= MinPayload {
		return
	}
	ok, err := p.try(r.WantDF)
	if ok {
		r.MaxDF = r.WantDF
		return
	}
	first := err
	lo, hi := MinPayload, r.WantDF // lo echoed, hi not
	for hi-lo > 1 && ctx.Err() == nil {
		mid := (lo + hi) / 2
		if ok, _ := p.try(mid); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	r.MaxDF = lo
	hdr := IPv4UDPHeaders
	if p.v6 {
		hdr = IPv6UDPHeaders
	}
	why := "lost on the path (a link or switch port with a smaller MTU drops it)"
	if isMsgSize(first) {
		why = fmt.Sprintf("refused locally: message too long (local %s MTU %d, or a path MTU the kernel learnt)", r.Interface, r.LocalMTU)
	}
	r.Error = join(r.Error, fmt.Sprintf("DF payload %d bytes (IP packet %d) %s; largest echoed %d bytes (IP packet %d)", r.WantDF, r.WantDF+hdr, why, lo, lo+hdr))
}

func (p *Prober) bye() {
	if p.conn == nil {
		return
	}
	msg := append(slices.Clone(magicBye), p.cfg.Self...)
	for range 3 {
		_, _ = p.conn.Write(msg)
		time.Sleep(20 * time.Millisecond)
	}
	p.conn.Close()
}

// Run probes every target in parallel and emits one result line each, then
// sends every responder a goodbye and emits a done line.
func Run(ctx context.Context, ps []*Prober, self string, out *Output) {
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.probe(ctx)
			r := p.res
			out.Emit(Line{Kind: "result", Self: self, Result: &r})
		}()
	}
	wg.Wait()
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.bye() }()
	}
	wg.Wait()
	out.Emit(Line{Kind: "done", Self: self, ElapsedMS: time.Since(start).Milliseconds()})
}

// Client is `rdmanet-probe client`: Open then Run.
func Client(ctx context.Context, cfg ClientConfig, out *Output) error {
	ps, err := Open(cfg)
	if err != nil {
		out.Emit(Line{Kind: "error", Self: cfg.Self, Error: err.Error()})
		return err
	}
	Run(ctx, ps, cfg.Self, out)
	return nil
}
