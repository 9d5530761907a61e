package main

import (
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
)

// TestCallLimitFlags: the daemon's limits on calls in flight default to
// sockserve's defaults and each flag sets its own.
func TestCallLimitFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want sockserve.Limits
	}{
		{name: "defaults", want: sockserve.DefaultLimits()},
		{name: "set", args: []string{"--max-inflight-calls=8", "--del-reserved-calls=2", "--max-queued-calls=16", "--max-queue-wait=5s"},
			want: sockserve.Limits{MaxInFlight: 8, DelReserve: 2, MaxQueued: 16, MaxWait: 5 * time.Second}},
		{name: "off", args: []string{"--max-inflight-calls=0"},
			want: sockserve.Limits{MaxInFlight: 0, DelReserve: sockserve.DefaultDelReserve, MaxQueued: sockserve.DefaultMaxQueued, MaxWait: sockserve.DefaultMaxWait}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, code := parseFlags(tc.args)
			if code >= 0 {
				t.Fatalf("parseFlags(%v) ended with %d", tc.args, code)
			}
			if c.Calls != tc.want {
				t.Errorf("limits %+v, want %+v", c.Calls, tc.want)
			}
		})
	}
}
