package meta

import (
	"sync/atomic"
	"testing"
)

// CountCNIArgsParses counts the parses of CNI_ARGS (ParsePodArgs' calls of
// types.LoadArgs) from now until t ends. Test builds only: the counter is a
// wrapper of loadArgs, which production code never replaces.
func CountCNIArgsParses(t testing.TB) *atomic.Int64 {
	var n atomic.Int64
	orig := loadArgs
	loadArgs = func(args string, container any) error {
		n.Add(1)
		return orig(args, container)
	}
	t.Cleanup(func() { loadArgs = orig })
	return &n
}
