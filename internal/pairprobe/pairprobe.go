// Package pairprobe is the in-pod side of `kubectl rdma verify`'s pair
// layer: a UDP echo responder and a client that proves, from one pod to its
// peers over the training network, that a peer answers (reachable), how
// long the round trip takes (RTT), and the largest datagram that crosses
// with don't-fragment set (IP_MTU_DISCOVER=IP_PMTUDISC_DO), against the
// size the network's MTU promises (MTU - IP/UDP headers).
//
// It runs as an ephemeral container (rdmanet-probe serve / client) from
// rdmanet's own image, so in the pod's network namespace and independent of
// what the user's image holds. Input is one JSON argument (no shell in the
// image to build command lines); output is JSON lines on stdout, each
// prefixed with Marker, read back from the container's log.
//
// The probe uses no Kubernetes packages: it is small and starts fast.
package pairprobe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// DefaultPort is the UDP port responders listen on.
const DefaultPort = 47471

// Marker prefixes every output line the CLI reads back.
const Marker = "@@rdma-probe "

// Header sizes: a DF datagram's payload is MTU minus these.
const (
	IPv4UDPHeaders = 20 + 8
	IPv6UDPHeaders = 40 + 8
)

// MinPayload is the size of the small reachability probes (it holds the
// probe header).
const MinPayload = 64

// PayloadFor is the largest UDP payload an IP packet of size mtu carries.
func PayloadFor(mtu int, v6 bool) int {
	if v6 {
		return mtu - IPv6UDPHeaders
	}
	return mtu - IPv4UDPHeaders
}

// ServeConfig is `rdmanet-probe serve`'s argument.
type ServeConfig struct {
	// Self names the pod (for the log).
	Self string `json:"self"`
	// Listen are the training addresses to answer on (one socket each, so
	// replies leave from the address asked); empty: the IPv4 wildcard.
	Listen []string `json:"listen,omitempty"`
	Port   int      `json:"port"`
	// Expect is the number of distinct peers whose "bye" ends the
	// responder (0: only MaxWait does).
	Expect int `json:"expect"`
	// MaxWaitMS bounds the responder's life: an ephemeral container cannot
	// be stopped from outside, so it stops itself.
	MaxWaitMS int64 `json:"max_wait_ms"`
}

// Target is one peer address a client probes.
type Target struct {
	// Peer is the peer pod's name, Network the attachment ("ns/nad").
	Peer    string `json:"peer"`
	Network string `json:"network"`
	// Interface is the local training interface (net1); Src its address
	// (the datagrams' source), Dst the peer's training address.
	Interface string `json:"interface"`
	Src       string `json:"src"`
	Dst       string `json:"dst"`
	// MTU is the MTU to prove end to end (the NAD's); 0 means the local
	// interface's.
	MTU int `json:"mtu,omitempty"`
}

// ClientConfig is `rdmanet-probe client`'s argument.
type ClientConfig struct {
	Self    string   `json:"self"`
	Port    int      `json:"port"`
	Targets []Target `json:"targets"`
	// WaitMS is how long one datagram's echo is waited for (default 300).
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Attempts per size before it counts as lost (default 3).
	Attempts int `json:"attempts,omitempty"`
	// StartupMS is how long a peer that does not answer yet (its
	// responder still starting) is retried before it is unreachable
	// (default 5000).
	StartupMS int64 `json:"startup_ms,omitempty"`
	// Pings is the number of small echoes the RTT is the median of
	// (default 5).
	Pings int `json:"pings,omitempty"`
}

func (c *ClientConfig) defaults() {
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.WaitMS <= 0 {
		c.WaitMS = 300
	}
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	if c.StartupMS <= 0 {
		c.StartupMS = 5000
	}
	if c.Pings <= 0 {
		c.Pings = 5
	}
}

// Validate checks a client config (before any socket is opened). Errors
// name the field, the value and the rule.
func (c *ClientConfig) Validate() error {
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("client config: port %d: want 1-65535", c.Port)
	}
	for i, t := range c.Targets {
		src, err := netip.ParseAddr(t.Src)
		if err != nil {
			return fmt.Errorf("client config: targets[%d] (peer %s): src %q is not an IP address", i, t.Peer, t.Src)
		}
		dst, err := netip.ParseAddr(t.Dst)
		if err != nil {
			return fmt.Errorf("client config: targets[%d] (peer %s): dst %q is not an IP address", i, t.Peer, t.Dst)
		}
		if src.Unmap().Is4() != dst.Unmap().Is4() {
			return fmt.Errorf("client config: targets[%d] (peer %s): src %s and dst %s are of different IP families", i, t.Peer, t.Src, t.Dst)
		}
		if t.MTU != 0 && (t.MTU < 576 || t.MTU > 65535) {
			return fmt.Errorf("client config: targets[%d] (peer %s): mtu %d: want 576-65535 or 0 (the interface's)", i, t.Peer, t.MTU)
		}
	}
	return nil
}

// Result is what a client found for one target.
type Result struct {
	Target
	// Reachable: a small datagram was echoed.
	Reachable bool `json:"reachable"`
	// RTTMicros is the median round trip of the small echoes.
	RTTMicros int64 `json:"rtt_us"`
	// WantDF is the payload the MTU promises (MTU - headers); MaxDF the
	// largest DF payload echoed (0 when none).
	WantDF int `json:"want_df_bytes"`
	MaxDF  int `json:"max_df_bytes"`
	// LocalMTU is the local interface's MTU; LocalCIDR the source
	// address with the prefix length it has on that interface.
	LocalMTU  int    `json:"local_mtu"`
	LocalCIDR string `json:"local_cidr,omitempty"`
	// BoundToDevice: SO_BINDTODEVICE took (else only the source address
	// was bound and routing picked the interface).
	BoundToDevice bool `json:"bound_to_device"`
	// Error says why a layer failed (empty when everything passed).
	Error string `json:"error,omitempty"`
}

// Line is one output line (after Marker): Kind "ready" (a responder
// listens), "result" (Result set), "error" (Error set: the probe itself
// failed), "done" (the client finished).
type Line struct {
	Kind   string  `json:"kind"`
	Self   string  `json:"self,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Listen are a ready responder's addresses.
	Listen []string `json:"listen,omitempty"`
	// ElapsedMS is the client's run time (done).
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
}

// Output writes Lines, one per call, safe for concurrent use.
type Output struct {
	mu sync.Mutex
	W  io.Writer
}

// Emit writes l as one marked JSON line.
func (o *Output) Emit(l Line) {
	b, _ := json.Marshal(l)
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.W, "%s%s\n", Marker, b)
}

// ParseOutput reads a probe's log: the marked lines, in order. Other lines
// (a runtime's message, a panic) are returned in other.
func ParseOutput(log string) (lines []Line, other []string, err error) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		s := sc.Text()
		// A log read with timestamps, or a runtime prefix: find the marker.
		i := strings.Index(s, Marker)
		if i < 0 {
			if strings.TrimSpace(s) != "" {
				other = append(other, s)
			}
			continue
		}
		var l Line
		if err := json.Unmarshal([]byte(s[i+len(Marker):]), &l); err != nil {
			return lines, other, fmt.Errorf("probe output line %q: %w", s, err)
		}
		lines = append(lines, l)
	}
	return lines, other, sc.Err()
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
