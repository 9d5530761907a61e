package pairprobe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/rdmanet/rdmanet/internal/netops"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// pairNS is two pod stand-ins joined by a veth pair: a0 (10.99.0.1/24) in
// A, b0 (10.99.0.2/24) in B. A veth end drops a frame larger than its own
// MTU on receive, and a DF send larger than the sender's MTU fails with
// EMSGSIZE: an MTU-limited training path in miniature.
func pairNS(t *testing.T, mtuA, mtuB int) (a, b ns.NetNS) {
	t.Helper()
	a, b = netnsutil.NewNS(t), netnsutil.NewNS(t)
	netnsutil.AddVeth(t, a, "a0", nil, "b0", b)
	for _, x := range []struct {
		n    ns.NetNS
		link string
		cidr string
		mtu  int
	}{{a, "a0", "10.99.0.1/24", mtuA}, {b, "b0", "10.99.0.2/24", mtuB}} {
		ip, pn, _ := net.ParseCIDR(x.cidr)
		pn.IP = ip
		netnsutil.Do(t, x.n, func() error { return netops.AddAddr(x.link, pn) })
		netnsutil.SetMTU(t, x.n, x.link, x.mtu)
		netnsutil.SetUp(t, x.n, x.link)
	}
	// Until linkwatch has run (it may wait up to a second) the link has
	// no qdisc and drops every packet: wait until both ends are running.
	for _, x := range []struct {
		n    ns.NetNS
		link string
	}{{a, "a0"}, {b, "b0"}} {
		netnsutil.Do(t, x.n, func() error {
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				ifc, err := net.InterfaceByName(x.link)
				if err == nil && ifc.Flags&net.FlagRunning != 0 {
					return nil
				}
				if time.Now().After(end) {
					return fmt.Errorf("%s not running after 5s (%v)", x.link, err)
				}
			}
		})
	}
	return a, b
}

func TestProbeNetns(t *testing.T) {
	netnsutil.RequireRoot(t)
	tests := []struct {
		name         string
		mtuA, mtuB   int
		nadMTU       int
		dst          string
		noResponder  bool
		wantReach    bool
		wantMaxDF    int
		wantWantDF   int
		wantErr      string // substring of Result.Error; "" = none
		wantBoundDev bool
	}{
		{name: "jumbo end to end passes", mtuA: 9000, mtuB: 9000, nadMTU: 9000, dst: "10.99.0.2",
			wantReach: true, wantMaxDF: 8972, wantWantDF: 8972, wantBoundDev: true},
		{name: "1500 end to end passes at the right size", mtuA: 1500, mtuB: 1500, nadMTU: 1500, dst: "10.99.0.2",
			wantReach: true, wantMaxDF: 1472, wantWantDF: 1472, wantBoundDev: true},
		{name: "MTU 0 in the plan: the local interface's is proved", mtuA: 4000, mtuB: 4000, dst: "10.99.0.2",
			wantReach: true, wantMaxDF: 3972, wantWantDF: 3972, wantBoundDev: true},
		{name: "peer side limited to 1500: the jumbo DF size is lost, 1472 passes", mtuA: 9000, mtuB: 1500, nadMTU: 9000, dst: "10.99.0.2",
			wantReach: true, wantMaxDF: 1472, wantWantDF: 8972, wantErr: "DF payload 8972 bytes (IP packet 9000) lost on the path", wantBoundDev: true},
		{name: "local side limited to 1500: the send is refused with EMSGSIZE", mtuA: 1500, mtuB: 9000, nadMTU: 9000, dst: "10.99.0.2",
			wantReach: true, wantMaxDF: 1472, wantWantDF: 8972, wantErr: "refused locally: message too long (local a0 MTU 1500", wantBoundDev: true},
		{name: "no responder: port unreachable", mtuA: 9000, mtuB: 9000, nadMTU: 9000, dst: "10.99.0.2", noResponder: true,
			wantWantDF: 8972, wantErr: "no responder listens on port", wantBoundDev: true},
		{name: "nobody at the address: no echo", mtuA: 9000, mtuB: 9000, nadMTU: 9000, dst: "10.99.0.3",
			wantWantDF: 8972, wantErr: "10.99.0.1 → 10.99.0.3: no echo within", wantBoundDev: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pairNS(t, tc.mtuA, tc.mtuB)
			port := 47471
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			served := make(chan struct{})
			var serveOut bytes.Buffer
			if tc.noResponder {
				close(served)
			} else {
				var r *Responder
				netnsutil.Do(t, b, func() error {
					var err error
					r, err = Listen(ServeConfig{Self: "b", Listen: []string{"10.99.0.2"}, Port: port, Expect: 1, MaxWaitMS: 30000})
					return err
				})
				go func() {
					defer close(served)
					_ = r.Serve(ctx)
					serveOut.WriteString("done")
				}()
			}
			cfg := ClientConfig{Self: "a", Port: port, WaitMS: 100, Attempts: 2, StartupMS: 800, Pings: 3,
				Targets: []Target{{Peer: "b", Network: "ns/train", Interface: "a0", Src: "10.99.0.1", Dst: tc.dst, MTU: tc.nadMTU}}}
			var ps []*Prober
			netnsutil.Do(t, a, func() error {
				var err error
				ps, err = Open(cfg)
				return err
			})
			var out bytes.Buffer
			Run(ctx, ps, "a", &Output{W: &out})
			lines, other, err := ParseOutput(out.String())
			if err != nil || len(other) > 0 {
				t.Fatalf("ParseOutput: %v, other lines %q", err, other)
			}
			if len(lines) != 2 || lines[0].Kind != "result" || lines[1].Kind != "done" {
				t.Fatalf("lines = %+v, want a result and done", lines)
			}
			r := lines[0].Result
			t.Logf("client ran %dms: reachable %v, RTT %dµs, max DF %d of %d", lines[1].ElapsedMS, r.Reachable, r.RTTMicros, r.MaxDF, r.WantDF)
			if r.Reachable != tc.wantReach || r.MaxDF != tc.wantMaxDF && tc.wantReach || r.WantDF != tc.wantWantDF {
				t.Errorf("reachable %v max DF %d want DF %d, want %v %d %d (error %q)", r.Reachable, r.MaxDF, r.WantDF, tc.wantReach, tc.wantMaxDF, tc.wantWantDF, r.Error)
			}
			if tc.wantErr == "" && r.Error != "" || !strings.Contains(r.Error, tc.wantErr) {
				t.Errorf("error = %q, want it to contain %q", r.Error, tc.wantErr)
			}
			if r.BoundToDevice != tc.wantBoundDev || r.LocalMTU != tc.mtuA || r.LocalCIDR != "10.99.0.1/24" {
				t.Errorf("bound %v local MTU %d CIDR %q, want %v %d 10.99.0.1/24", r.BoundToDevice, r.LocalMTU, r.LocalCIDR, tc.wantBoundDev, tc.mtuA)
			}
			if tc.wantReach && r.RTTMicros <= 0 {
				t.Errorf("rtt_us = %d, want > 0", r.RTTMicros)
			}
			// The responder ends on the client's goodbye (Expect 1), long
			// before MaxWait.
			if tc.wantReach {
				select {
				case <-served:
				case <-time.After(3 * time.Second):
					t.Errorf("responder still running 3s after the client's goodbye")
				}
			}
			cancel()
			<-served
		})
	}
}

// TestProbeWrongInterface: a plan naming an interface the pod lacks, or an
// address the interface lacks, says so instead of probing from elsewhere.
func TestProbeWrongInterface(t *testing.T) {
	netnsutil.RequireRoot(t)
	a, _ := pairNS(t, 1500, 1500)
	tests := []struct {
		name    string
		target  Target
		wantErr string
	}{
		{name: "no such interface", target: Target{Peer: "b", Interface: "net1", Src: "10.99.0.1", Dst: "10.99.0.2"}, wantErr: "the pod has no interface net1"},
		{name: "address not on the interface", target: Target{Peer: "b", Interface: "a0", Src: "10.99.0.7", Dst: "10.99.0.2"}, wantErr: "interface a0 does not have the address 10.99.0.7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*Prober
			netnsutil.Do(t, a, func() error {
				var err error
				ps, err = Open(ClientConfig{Self: "a", WaitMS: 50, Attempts: 1, StartupMS: 200, Targets: []Target{tc.target}})
				return err
			})
			var out bytes.Buffer
			Run(context.Background(), ps, "a", &Output{W: &out})
			lines, _, _ := ParseOutput(out.String())
			if len(lines) == 0 || lines[0].Result == nil || !strings.Contains(lines[0].Result.Error, tc.wantErr) || lines[0].Result.Reachable {
				t.Fatalf("output %s: want an unreachable result with %q", out.String(), tc.wantErr)
			}
		})
	}
}
