package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The two ranks, built and run as the cluster tier runs them (one process
// each), over loopback: rank 1 resolves MASTER_ADDR, they exchange their
// "training" addresses, move the bulk and ping-pong; both print what they
// saw. Failures name the step.
func TestTwoRanksOverLoopback(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rdmanet-rendezvous")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	tests := []struct {
		name    string
		env     []string
		args    []string
		wantErr [2]string // per rank; "" = success
	}{
		{name: "both ranks over lo", env: []string{"MASTER_ADDR=localhost", "MASTER_PORT=29511", "NCCL_SOCKET_IFNAME==lo"},
			args: []string{"--data-port", "29512", "--bulk-bytes", "3000000", "--ping-pongs", "20"}},
		{name: "no training interface", env: []string{"MASTER_ADDR=localhost", "MASTER_PORT=29513", "NCCL_SOCKET_IFNAME=nosuch0"},
			args: []string{"--timeout", "2s"}, wantErr: [2]string{"interface nosuch0", "interface nosuch0"}},
		{name: "rank 0 never comes", env: []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=29514", "NCCL_SOCKET_IFNAME==lo"},
			args: []string{"--timeout", "2s"}, wantErr: [2]string{"skip", "connect to rank 0 at 127.0.0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			var outs, errs [2]string
			var res [2]Result
			for rank := 0; rank < 2; rank++ {
				if tc.wantErr[rank] == "skip" {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(bin, tc.args...)
					cmd.Env = append(os.Environ(), append(tc.env, "JOB_COMPLETION_INDEX="+string(rune('0'+rank)))...)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					outs[rank] = string(out)
					if err != nil {
						errs[rank] = stderr.String()
						return
					}
					if err := json.Unmarshal(out, &res[rank]); err != nil {
						errs[rank] = "bad JSON: " + err.Error()
					}
				}()
			}
			wg.Wait()
			for rank := 0; rank < 2; rank++ {
				want := tc.wantErr[rank]
				switch {
				case want == "skip":
				case want == "" && errs[rank] != "":
					t.Errorf("rank %d failed: %s", rank, errs[rank])
				case want != "" && !strings.Contains(errs[rank], want):
					t.Errorf("rank %d: error %q, want it to name %q (stdout %q)", rank, errs[rank], want, outs[rank])
				}
			}
			if tc.wantErr != [2]string{} {
				return
			}
			for rank, r := range res {
				if r.BulkBytes != 3000000 || r.DataIfname != "lo" || r.PeerAddr != "127.0.0.1" || r.LocalAddr != "127.0.0.1" {
					t.Errorf("rank %d: %+v", rank, r)
				}
			}
			if res[1].PingPongs != 20 || res[0].PingPongs != 20 || len(res[1].MasterIPs) == 0 {
				t.Errorf("ping-pongs %d/%d, master IPs %v", res[0].PingPongs, res[1].PingPongs, res[1].MasterIPs)
			}
		})
	}
}
