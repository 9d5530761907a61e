package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/telemetry"
)

// TestRunRefusesBadCallLimits: a limit the daemon cannot work with is a
// usage error (exit 2) naming its flag, before anything is served.
func TestRunRefusesBadCallLimits(t *testing.T) {
	tests := []struct {
		name  string
		calls sockserve.Limits
		flag  string
	}{
		{name: "reserve takes every slot", calls: sockserve.Limits{MaxInFlight: 8, DelReserve: 8, MaxQueued: 1, MaxWait: 1}, flag: sockserve.FlagDelReserve},
		{name: "negative limit", calls: sockserve.Limits{MaxInFlight: -1}, flag: sockserve.FlagMaxInFlight},
		{name: "queue without a wait", calls: sockserve.Limits{MaxInFlight: 8, MaxQueued: 4}, flag: sockserve.FlagMaxWait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), Config{StatusWrite: "async", LogFormat: telemetry.LogText, LogLevel: "info",
				Meta: false, PluginSocket: t.TempDir() + "/p.sock", Calls: tc.calls})
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), "--"+tc.flag) {
				t.Fatalf("Run: %v, want a usage error (exit 2) naming --%s", err, tc.flag)
			}
		})
	}
}
