package plugind

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/rdmanet/rdmanet/internal/daemon/sockserve"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
)

// gatedRunner holds every ADD until gate closes and answers DELs at once.
type gatedRunner struct{ gate chan struct{} }

func (g *gatedRunner) Serve(ctx context.Context, plugin, build string, stdin []byte, environ []string) ([]byte, string, error) {
	if daemonclient.Getenv(environ, "CNI_COMMAND") == "ADD" {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	return []byte(`{"cniVersion":"1.0.0"}`), "", nil
}

// TestBurstThroughSocket: a burst of far more concurrent calls than the
// limit, through the plugin socket and the plugins' own client
// (daemonclient.Call): the ADDs past the slots and the queue get CNI error
// 11 at once, every DEL runs while the ADDs hold their slots, the queued
// ADDs run once slots free, and the goroutines come back to where they
// were.
func TestBurstThroughSocket(t *testing.T) {
	const (
		slots, reserve, queue = 4, 2, 4
		adds, dels            = 40, 20
		admitted              = slots - reserve + queue // ADDs that run
	)
	l, err := sockserve.NewLimiter(sockserve.Limits{MaxInFlight: slots, DelReserve: reserve, MaxQueued: queue, MaxWait: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "plugins.sock")
	r := &gatedRunner{gate: make(chan struct{})}
	s := &Server{Socket: sock, Runner: r, Log: slog.New(slog.DiscardHandler), Limiter: l}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); !s.Serving(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	baseline := runtime.NumGoroutine()

	call := func(cmd string, i int) daemonclient.Result {
		env := []string{"CNI_COMMAND=" + cmd, fmt.Sprintf("CNI_CONTAINERID=%s-%d", strings.ToLower(cmd), i), "CNI_IFNAME=net1"}
		return daemonclient.Call(sock, "sriov", cmd, []byte(`{"cniVersion":"1.0.0","name":"n","type":"sriov"}`), env, "build")
	}
	var wg sync.WaitGroup
	addResults := make(chan daemonclient.Result, adds)
	for i := range adds {
		wg.Add(1)
		go func() { defer wg.Done(); addResults <- call("ADD", i) }()
	}
	// every ADD is running, waiting or refused
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
		st := l.Stats()
		if st.InFlight["add"] == slots-reserve && st.Queued["add"] == queue && st.Rejected[[2]string{"add", sockserve.ReasonQueueFull}] == adds-admitted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ADD burst never settled: %+v", st)
		}
	}
	for range adds - admitted {
		res := <-addResults
		if res.Outcome != daemonclient.Answered || res.Err == nil || res.Err.Code != types.ErrTryAgainLater {
			t.Fatalf("an ADD past the slots and the queue: %+v, want CNI error %d", res, types.ErrTryAgainLater)
		}
		for _, want := range []string{"--" + sockserve.FlagMaxInFlight, "--" + sockserve.FlagMaxQueued, "try again later"} {
			if !strings.Contains(res.Err.Msg+res.Err.Details, want) {
				t.Errorf("refusal %q lacks %q", res.Err.Msg, want)
			}
		}
	}
	// DELs while the ADDs hold every slot they may: all run
	delResults := make(chan daemonclient.Result, dels)
	for i := range dels {
		wg.Add(1)
		go func() { defer wg.Done(); delResults <- call("DEL", i) }()
	}
	for range dels {
		if res := <-delResults; res.Outcome != daemonclient.Answered || res.Err != nil {
			t.Errorf("a DEL during the ADD burst: %+v, want it run", res)
		}
	}
	close(r.gate)
	for range admitted {
		if res := <-addResults; res.Outcome != daemonclient.Answered || res.Err != nil {
			t.Errorf("an ADD within the slots and the queue: %+v, want it run", res)
		}
	}
	wg.Wait()
	st := l.Stats()
	if st.InFlight["add"]+st.InFlight["del"]+st.Queued["add"]+st.Queued["del"] != 0 {
		t.Errorf("after the burst: %+v, want no slot held and none waiting", st)
	}
	for deadline := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > baseline; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %d after the burst, %d before:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
	}
}
