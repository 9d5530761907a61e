package meta

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowDevices is a kubelet whose first slow PodResources calls do not
// answer (they end with their context); later calls answer, or fail with
// err.
type slowDevices struct {
	slow  int32
	err   error
	calls atomic.Int32
}

func (s *slowDevices) PodDevices(ctx context.Context, _, _ string) (*Allocation, error) {
	if s.calls.Add(1) <= s.slow {
		<-ctx.Done()
		return nil, errors.New("rpc error: code = DeadlineExceeded desc = context deadline exceeded")
	}
	if s.err != nil {
		return nil, s.err
	}
	return &Allocation{Devices: Devices{"rdma/vfs": {"0000:3b:02.0"}}}, nil
}

// TestPodDevicesAsksAgainAfterATimeout: a PodResources call that runs out
// of apiTimeout while the ADD has time is asked again, at most
// podResourcesAttempts times; any other failure, and a timeout of the ADD
// itself, fail at once.
func TestPodDevicesAsksAgainAfterATimeout(t *testing.T) {
	const apiTimeout = 50 * time.Millisecond
	for _, tc := range []struct {
		name      string
		kubelet   *slowDevices
		addBudget time.Duration // the ADD's own deadline
		wantCalls int32
		wantErr   string // "" = the allocation
	}{
		{name: "answers at once", kubelet: &slowDevices{}, addBudget: time.Minute, wantCalls: 1},
		{name: "slow once, then answers", kubelet: &slowDevices{slow: 1}, addBudget: time.Minute, wantCalls: 2},
		{name: "slow twice, then answers", kubelet: &slowDevices{slow: 2}, addBudget: time.Minute, wantCalls: 3},
		{name: "never answers: the last error names the calls and the fix", kubelet: &slowDevices{slow: 100}, addBudget: time.Minute, wantCalls: podResourcesAttempts,
			wantErr: "3 calls, each bounded by apiTimeout 50ms: kubelet did not answer; fix:"},
		{name: "another error is not retried", kubelet: &slowDevices{err: errors.New("permission denied")}, addBudget: time.Minute, wantCalls: 1, wantErr: "permission denied"},
		{name: "the ADD's own deadline ends first: no second call", kubelet: &slowDevices{slow: 100}, addBudget: apiTimeout / 2, wantCalls: 1, wantErr: "DeadlineExceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plugin{Conf: &NetConf{APITimeoutDur: apiTimeout}, Devices: tc.kubelet, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			ctx, cancel := context.WithTimeout(context.Background(), tc.addBudget)
			defer cancel()
			alloc, err := p.podDevices(ctx, "team-a", "trainer-0")
			if got := tc.kubelet.calls.Load(); got != tc.wantCalls {
				t.Errorf("PodResources calls = %d, want %d", got, tc.wantCalls)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v, want the allocation", err)
				}
				if got := alloc.Devices["rdma/vfs"]; len(got) != 1 || got[0] != "0000:3b:02.0" {
					t.Errorf("devices = %v, want kubelet's answer", alloc.Devices)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(tc.wantErr, "fix:") && !strings.Contains(err.Error(), "DeadlineExceeded") {
				t.Errorf("err = %v, want kubelet's own error kept (%%w)", err)
			}
		})
	}
}
