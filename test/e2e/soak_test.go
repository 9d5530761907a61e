package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/sim"
	"github.com/rdmanet/rdmanet/test/netnsutil"
)

// soakEnvInt reads a positive integer knob of the soak.
func soakEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestSoak runs the fault soak (internal/sim.Soak) on two simulated nodes
// with a real rdmanet-daemon each: SOAK_CYCLES pod attach/detach cycles
// (default 300: the short soak of `make test`, enough for every fault of
// the plan at least once; `make soak` runs 10,000), SOAK_SEED to replay a
// run. It fails on any leak, duplicate, stranded VF, host difference,
// failed ADD or stuck DEL, and prints the one-line summary and the
// per-fault table (SOAK_REPORT=<file> writes the JSON report too).
func TestSoak(t *testing.T) {
	netnsutil.RequireRoot(t)
	cycles := soakEnvInt(t, "SOAK_CYCLES", 300)
	seed := int64(soakEnvInt(t, "SOAK_SEED", int(time.Now().UnixNano()%1_000_000_000)))
	dir, err := os.MkdirTemp("", "rsk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	o := sim.SoakOptions{Cycles: cycles, Seed: seed, WorkDir: filepath.Join(dir, "w"), BinDir: binDir,
		Parallel: soakEnvInt(t, "SOAK_PARALLEL", 16), NetnsPrefix: fmt.Sprintf("rsk%d", os.Getpid()), Progress: logWriter{t}}
	if f := os.Getenv("SOAK_FAULTS"); f != "" {
		o.Faults = strings.Split(f, ",")
	}
	// Ctrl-C or SIGTERM ends the soak in order: pods detached, nodes torn down
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := sim.Soak(ctx, o)
	if rep != nil {
		// the summary line goes to stdout as is: `make soak` greps it
		fmt.Println(rep.Line())
		fmt.Print(rep.Table())
		if p := os.Getenv("SOAK_REPORT"); p != "" {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(p, b, 0o644); werr != nil {
				t.Error(werr)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if left := leftoverNetns(t, o.NetnsPrefix); len(left) > 0 {
		t.Errorf("the soak left network namespaces: %v", left)
	}
	if !rep.Clean() {
		t.Fatalf("the soak found problems (replay with SOAK_SEED=%d):\n%s", rep.Seed, strings.Join(rep.Problems, "\n"))
	}
	if rep.Cycles < cycles {
		t.Fatalf("ran %d cycles, want %d", rep.Cycles, cycles)
	}
	for f, st := range rep.PerFault {
		if f != sim.FaultNone && st.Injected == 0 {
			t.Errorf("fault %s was never injected: raise SOAK_CYCLES", f)
		}
	}
}
