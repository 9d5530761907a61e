package sockserve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// op is one step of a limiter scenario.
type op struct {
	do     string // admit, wait, refuse, release, granted, cancel, stats
	name   string // the call's name in the scenario (admit, wait, release, granted, cancel)
	cmd    string // CNI verb (admit, wait, refuse)
	id     string // container (admit, wait, refuse; default: name)
	reason string // refuse, cancel: the refusal's reason
	// stats: slots held and calls waiting, by class
	addHeld, delHeld, addQueued, delQueued int
}

// pending is a call waiting in Admit.
type pending struct {
	cancel context.CancelFunc
	done   chan admitted
}

type admitted struct {
	release func()
	err     error
}

func TestLimiter(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
		ops  []op
	}{
		{name: "ADDs run up to their share, then wait, then are refused with code 11",
			lim: Limits{MaxInFlight: 4, DelReserve: 1, MaxQueued: 1, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"}, {do: "admit", name: "a2", cmd: "ADD"}, {do: "admit", name: "a3", cmd: "CHECK"},
				{do: "wait", name: "a4", cmd: "ADD"},
				{do: "refuse", cmd: "ADD", id: "a5", reason: ReasonQueueFull},
				{do: "stats", addHeld: 3, addQueued: 1},
				{do: "release", name: "a1"}, {do: "granted", name: "a4"},
				{do: "stats", addHeld: 3},
			}},
		{name: "ADDs never take the DEL reserve",
			lim: Limits{MaxInFlight: 2, DelReserve: 1, MaxQueued: 0, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"},
				{do: "refuse", cmd: "ADD", id: "a2", reason: ReasonQueueFull},
				{do: "admit", name: "d1", cmd: "DEL"},
				{do: "stats", addHeld: 1, delHeld: 1},
			}},
		{name: "DELs are never refused for a full queue and get the next slot before ADDs",
			lim: Limits{MaxInFlight: 2, DelReserve: 1, MaxQueued: 1, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"}, {do: "admit", name: "d1", cmd: "DEL"},
				{do: "wait", name: "a2", cmd: "ADD"},
				{do: "wait", name: "d2", cmd: "DEL"}, {do: "wait", name: "d3", cmd: "GC", id: "-"},
				{do: "stats", addHeld: 1, delHeld: 1, addQueued: 1, delQueued: 2},
				{do: "release", name: "a1"}, {do: "granted", name: "d2"},
				{do: "release", name: "d1"}, {do: "granted", name: "d3"},
				{do: "stats", delHeld: 2, addQueued: 1},
				{do: "release", name: "d2"}, {do: "granted", name: "a2"},
				{do: "stats", addHeld: 1, delHeld: 1},
			}},
		{name: "DELs take free ADD slots too",
			lim: Limits{MaxInFlight: 2, DelReserve: 1, MaxQueued: 1, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "d1", cmd: "DEL"}, {do: "admit", name: "d2", cmd: "DEL"},
				{do: "wait", name: "a1", cmd: "ADD"},
				{do: "release", name: "d1"}, {do: "granted", name: "a1"},
				{do: "stats", addHeld: 1, delHeld: 1},
			}},
		{name: "a cancelled waiter leaves the queue and takes no slot",
			lim: Limits{MaxInFlight: 1, DelReserve: 0, MaxQueued: 2, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"},
				{do: "wait", name: "a2", cmd: "ADD"}, {do: "wait", name: "a3", cmd: "ADD"},
				{do: "cancel", name: "a2", reason: ReasonStopping},
				{do: "stats", addHeld: 1, addQueued: 1},
				{do: "release", name: "a1"}, {do: "granted", name: "a3"},
				{do: "release", name: "a3"},
				{do: "stats"},
			}},
		{name: "a call waits no longer than its bound",
			lim: Limits{MaxInFlight: 1, DelReserve: 0, MaxQueued: 1, MaxWait: time.Millisecond},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"},
				{do: "refuse", cmd: "ADD", id: "a2", reason: ReasonWait},
				{do: "stats", addHeld: 1},
			}},
		{name: "a delegate's call under its container's takes no slot",
			lim: Limits{MaxInFlight: 1, DelReserve: 0, MaxQueued: 0, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD", id: "c1"},
				{do: "admit", name: "nested", cmd: "ADD", id: "c1"}, {do: "admit", name: "nested-del", cmd: "DEL", id: "c1"},
				{do: "refuse", cmd: "ADD", id: "c2", reason: ReasonQueueFull},
				{do: "stats", addHeld: 1},
				{do: "release", name: "nested"}, {do: "release", name: "a1"},
				{do: "admit", name: "a2", cmd: "ADD", id: "c2"},
				{do: "refuse", cmd: "ADD", id: "c1", reason: ReasonQueueFull}, // c1 holds nothing now
			}},
		{name: "STATUS, VERSION and no verb take no slot",
			lim: Limits{MaxInFlight: 1, DelReserve: 0, MaxQueued: 0, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"},
				{do: "admit", name: "s", cmd: "STATUS", id: "-"}, {do: "admit", name: "v", cmd: "VERSION", id: "-"}, {do: "admit", name: "e", cmd: "", id: "-"},
				{do: "stats", addHeld: 1},
			}},
		{name: "a second release is no second slot",
			lim: Limits{MaxInFlight: 1, DelReserve: 0, MaxQueued: 0, MaxWait: time.Hour},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"},
				{do: "release", name: "a1"}, {do: "release", name: "a1"},
				{do: "admit", name: "a2", cmd: "ADD"},
				{do: "refuse", cmd: "ADD", id: "a3", reason: ReasonQueueFull},
			}},
		{name: "no limit", lim: Limits{},
			ops: []op{
				{do: "admit", name: "a1", cmd: "ADD"}, {do: "admit", name: "a2", cmd: "ADD"}, {do: "admit", name: "d1", cmd: "DEL"},
				{do: "stats"},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLimiter(tc.lim, nil)
			if err != nil {
				t.Fatal(err)
			}
			releases := map[string]func(){}
			waiting := map[string]*pending{}
			defer func() {
				for _, p := range waiting {
					p.cancel()
				}
			}()
			for i, o := range tc.ops {
				id := o.id
				if id == "" {
					id = o.name
				} else if id == "-" {
					id = ""
				}
				call := Call{Command: o.cmd, ContainerID: id}
				switch o.do {
				case "admit":
					rel, waited, err := l.Admit(context.Background(), call)
					if err != nil || waited != 0 {
						t.Fatalf("step %d: %s %s: waited %v, %v; want admitted at once", i, o.cmd, o.name, waited, err)
					}
					releases[o.name] = rel
				case "wait":
					ctx, cancel := context.WithCancel(context.Background())
					p := &pending{cancel: cancel, done: make(chan admitted, 1)}
					before := l.Stats().Queued[ClassOf(o.cmd).String()]
					go func() {
						rel, _, err := l.Admit(ctx, call)
						p.done <- admitted{rel, err}
					}()
					waiting[o.name] = p
					// it waits once it is queued (or it came back at once)
					for l.Stats().Queued[ClassOf(o.cmd).String()] == before {
						select {
						case a := <-p.done:
							t.Fatalf("step %d: %s %s came back at once (%v), want it waiting", i, o.cmd, o.name, a.err)
						default:
							time.Sleep(time.Millisecond)
						}
					}
				case "granted":
					a := <-waiting[o.name].done
					if a.err != nil {
						t.Fatalf("step %d: %s was refused: %v; want the freed slot", i, o.name, a.err)
					}
					releases[o.name] = a.release
					delete(waiting, o.name)
				case "cancel":
					waiting[o.name].cancel()
					a := <-waiting[o.name].done
					checkRefusal(t, i, a.err, o.reason)
					delete(waiting, o.name)
				case "refuse":
					rel, _, err := l.Admit(context.Background(), call)
					if err == nil {
						rel()
					}
					checkRefusal(t, i, err, o.reason)
				case "release":
					releases[o.name]()
				case "stats":
					s := l.Stats()
					got := [4]int{s.InFlight["add"], s.InFlight["del"], s.Queued["add"], s.Queued["del"]}
					if want := [4]int{o.addHeld, o.delHeld, o.addQueued, o.delQueued}; got != want {
						t.Fatalf("step %d: held add/del, queued add/del = %v, want %v", i, got, want)
					}
				default:
					t.Fatalf("step %d: unknown op %q", i, o.do)
				}
			}
		})
	}
}

// checkRefusal: err is the limiter's refusal for reason, CNI error 11,
// naming the limit's flag and what to do.
func checkRefusal(t *testing.T, step int, err error, reason string) {
	t.Helper()
	var r *RejectedError
	if !errors.As(err, &r) {
		t.Fatalf("step %d: %v, want a refusal (%s)", step, err, reason)
	}
	if r.Reason != reason || r.CNI.Code != types.ErrTryAgainLater {
		t.Fatalf("step %d: refused for %q with code %d, want %q with code %d", step, r.Reason, r.CNI.Code, reason, types.ErrTryAgainLater)
	}
	text := r.CNI.Msg + " " + r.CNI.Details
	want := []string{"--" + FlagMaxInFlight, "try again later", "raise"}
	switch reason {
	case ReasonQueueFull:
		want = append(want, "--"+FlagMaxQueued)
	case ReasonWait:
		want = append(want, "--"+FlagMaxWait)
	case ReasonStopping:
		want = append(want, "stopping")
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("step %d: refusal %q lacks %q", step, text, w)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name    string
		lim     Limits
		wantErr string // "" valid; else a flag the error names
	}{
		{name: "defaults", lim: DefaultLimits()},
		{name: "off", lim: Limits{}},
		{name: "off ignores the rest", lim: Limits{DelReserve: 5, MaxQueued: -1}},
		{name: "no waiting", lim: Limits{MaxInFlight: 2, DelReserve: 1}},
		{name: "negative limit", lim: Limits{MaxInFlight: -1}, wantErr: "--" + FlagMaxInFlight},
		{name: "reserve takes every slot", lim: Limits{MaxInFlight: 4, DelReserve: 4, MaxQueued: 1, MaxWait: time.Second}, wantErr: "--" + FlagDelReserve},
		{name: "negative reserve", lim: Limits{MaxInFlight: 4, DelReserve: -1}, wantErr: "--" + FlagDelReserve},
		{name: "negative queue", lim: Limits{MaxInFlight: 4, MaxQueued: -1}, wantErr: "--" + FlagMaxQueued},
		{name: "a queue without a wait", lim: Limits{MaxInFlight: 4, MaxQueued: 4}, wantErr: "--" + FlagMaxWait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.lim.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}
