package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmanet/rdmanet/internal/daemon/plugind"
	"github.com/rdmanet/rdmanet/internal/daemonclient"
	"github.com/rdmanet/rdmanet/internal/telemetry"
	"github.com/rdmanet/rdmanet/test/syncbuf"
)

type answer struct{}

func (answer) Serve(ctx context.Context, plugin, build string, stdin []byte, environ []string) ([]byte, string, error) {
	time.Sleep(3 * time.Millisecond)
	return []byte("{}"), "", nil
}

// TestServedADDsReadsTheDaemonsLog: the bench reads the daemon's own time
// per ADD from the lines the real plugin socket server writes (the bench
// broke once when an attribute was added between two it matched).
func TestServedADDsReadsTheDaemonsLog(t *testing.T) {
	var log syncbuf.Buffer
	sock := filepath.Join(t.TempDir(), "plugins.sock")
	logger, err := telemetry.NewLogger(&log, telemetry.LogText, "info") // rdmanet-daemon's default
	if err != nil {
		t.Fatal(err)
	}
	srv := &plugind.Server{Socket: sock, Runner: answer{}, Log: logger}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	for !srv.Serving() {
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range []struct{ cmd, id string }{{"ADD", "c-add"}, {"DEL", "c-del"}, {"ADD", "c-add-2"}} {
		env := []string{"CNI_COMMAND=" + c.cmd, "CNI_CONTAINERID=" + c.id, "CNI_IFNAME=net1", "CNI_ARGS=K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns"}
		if r := daemonclient.Call(sock, "rdmanet-ipam", c.cmd, []byte("{}"), env, "build"); r.Outcome != daemonclient.Answered {
			t.Fatalf("%s %s not answered: %s", c.cmd, c.id, r.Reason)
		}
	}
	got := servedADDs(log.String())
	if len(got) != 2 {
		t.Fatalf("served ADDs %v, want c-add and c-add-2 only; log:\n%s", got, log.String())
	}
	for _, id := range []string{"c-add", "c-add-2"} {
		if d, ok := got[id]; !ok || d < 3*time.Millisecond || d > time.Minute {
			t.Errorf("ADD %s: took %v (found %v), want the runner's ≥3ms; log:\n%s", id, d, ok, log.String())
		}
	}
}
