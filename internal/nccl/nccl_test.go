package nccl

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parseFiles(t testing.TB, names ...string) *Report {
	t.Helper()
	var rs []io.Reader
	for _, n := range names {
		f, err := os.Open(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rs = append(rs, f)
	}
	r, err := Parse(names, rs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFixtures(t *testing.T) {
	for _, tc := range []struct {
		name       string
		file       string
		transport  string
		gdr        bool
		version    string
		ranks      int
		perRank    map[int]string // rank -> transport
		hcas       []string
		oob        []string
		busbw      float64 // 0 = no nccl-tests summary
		rows       int
		problems   []string
		noProblems []string
		worst      string
	}{
		{name: "RoCE with GPUDirect RDMA", file: "ib_gdr.log", transport: TransportRoCE, gdr: true, version: "2.21.5+cuda12.4", ranks: 4,
			perRank: map[int]string{0: TransportRoCE, 3: TransportRoCE}, hcas: []string{"mlx5_2:1/RoCE", "mlx5_3:1/RoCE"}, oob: []string{"net1:10.60.1.11", "net1:10.60.1.12"},
			busbw: 20.5, rows: 6, noProblems: []string{"SOCKET_FALLBACK", "NO_GDR", "MIXED_TRANSPORT"}, worst: ""},
		{name: "RoCE without GDR, older formats", file: "ib_nogdr.log", transport: TransportRoCE, gdr: false, version: "2.18.3+cuda12.2", ranks: 4,
			perRank: map[int]string{1: TransportRoCE}, busbw: 16.4, rows: 6, problems: []string{"NO_GDR"}, worst: "warning"},
		{name: "silent socket fallback", file: "socket_fallback.log", transport: TransportSocket, ranks: 4,
			perRank: map[int]string{2: TransportSocket}, busbw: 2.48, rows: 6, problems: []string{"SOCKET_FALLBACK"}, noProblems: []string{"SOCKET_BASELINE"}, worst: "error"},
		{name: "socket baseline under mpirun prefixes", file: "socket_baseline.log", transport: TransportSocket, ranks: 4, busbw: 2.56, rows: 6,
			problems: []string{"SOCKET_BASELINE"}, noProblems: []string{"SOCKET_FALLBACK"}, worst: "info"},
		{name: "mixed ranks from kubectl logs --prefix", file: "mixed_ranks.log", transport: TransportMixed, ranks: 4,
			perRank: map[int]string{0: TransportRoCE, 1: TransportRoCE, 2: TransportSocket, 3: TransportSocket}, problems: []string{"MIXED_TRANSPORT"}, worst: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseFiles(t, tc.file)
			if r.Transport != tc.transport || r.GDR != tc.gdr {
				t.Errorf("transport %s gdr %v, want %s %v", r.Transport, r.GDR, tc.transport, tc.gdr)
			}
			if tc.version != "" && r.Version != tc.version {
				t.Errorf("version %q, want %q", r.Version, tc.version)
			}
			if len(r.Ranks) != tc.ranks {
				t.Errorf("%d ranks, want %d: %+v", len(r.Ranks), tc.ranks, r.Ranks)
			}
			for i, rk := range r.Ranks {
				if rk.Rank != i {
					t.Errorf("ranks not numbered/sorted: position %d has rank %d", i, rk.Rank)
				}
				if want, ok := tc.perRank[rk.Rank]; ok && rk.Transport != want {
					t.Errorf("rank %d transport %s, want %s", rk.Rank, rk.Transport, want)
				}
			}
			if tc.hcas != nil && strings.Join(r.HCAs, ",") != strings.Join(tc.hcas, ",") {
				t.Errorf("HCAs %v, want %v", r.HCAs, tc.hcas)
			}
			if tc.oob != nil && strings.Join(r.OOB, ",") != strings.Join(tc.oob, ",") {
				t.Errorf("OOB %v, want %v", r.OOB, tc.oob)
			}
			if tc.busbw == 0 && r.BusBWAvg != nil {
				t.Errorf("busbw %v, want none", *r.BusBWAvg)
			}
			if tc.busbw != 0 && (r.BusBWAvg == nil || *r.BusBWAvg < tc.busbw*0.9 || *r.BusBWAvg > tc.busbw*1.1) {
				got := -1.0
				if r.BusBWAvg != nil {
					got = *r.BusBWAvg
				}
				t.Errorf("busbw %v, want about %v", got, tc.busbw)
			}
			if len(r.Rows) != tc.rows {
				t.Errorf("%d nccl-tests rows, want %d", len(r.Rows), tc.rows)
			}
			codes := map[string]bool{}
			for _, p := range r.Problems {
				codes[p.Code] = true
			}
			for _, c := range tc.problems {
				if !codes[c] {
					t.Errorf("missing problem %s in %+v", c, r.Problems)
				}
			}
			for _, c := range tc.noProblems {
				if codes[c] {
					t.Errorf("unexpected problem %s", c)
				}
			}
			if r.Worst() != tc.worst {
				t.Errorf("worst severity %q, want %q (%+v)", r.Worst(), tc.worst, r.Problems)
			}
		})
	}
}

func TestJSONShape(t *testing.T) {
	r := parseFiles(t, "ib_gdr.log")
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["transport"] != "RoCE" || m["gdr"] != true || m["gdr_verdict"] != "yes" {
		t.Errorf("transport/gdr = %v/%v", m["transport"], m["gdr"])
	}
	if _, ok := m["busbw_avg_gbps"].(float64); !ok {
		t.Errorf("busbw_avg_gbps = %v, want a number", m["busbw_avg_gbps"])
	}
	ranks, ok := m["ranks"].([]any)
	if !ok || len(ranks) != 4 {
		t.Fatalf("ranks = %v", m["ranks"])
	}
	// A log without nccl-tests has busbw_avg_gbps null, not absent.
	r = parseFiles(t, "mixed_ranks.log")
	buf.Reset()
	_ = r.WriteJSON(&buf)
	if !strings.Contains(buf.String(), `"busbw_avg_gbps": null`) {
		t.Error("busbw_avg_gbps should be null without nccl-tests output")
	}
}

func TestBaseline(t *testing.T) {
	r := parseFiles(t, "ib_gdr.log")
	b := parseFiles(t, "socket_baseline.log")
	r.CompareTo(b)
	if r.Baseline == nil || r.Baseline.Speedup == nil || *r.Baseline.Speedup < 5 {
		t.Fatalf("baseline = %+v, want a speedup > 5x", r.Baseline)
	}
	if r.Baseline.Largest == nil || r.Baseline.Largest.Size != 1<<30 {
		t.Errorf("largest common size = %+v, want 1 GiB", r.Baseline.Largest)
	}
	// The other way round: a socket run is not faster than... itself being IB is required for the warning.
	slow := parseFiles(t, "socket_baseline.log")
	slowIB := parseFiles(t, "ib_gdr.log")
	v := *slow.BusBWAvg
	slowIB.BusBWAvg = &v
	slowIB.CompareTo(slow)
	found := false
	for _, p := range slowIB.Problems {
		found = found || p.Code == "NOT_FASTER_THAN_BASELINE"
	}
	if !found {
		t.Error("an IB run no faster than its socket baseline must be flagged")
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"transport  RoCE", "GPUDirect RDMA yes", "speedup", "mlx5_2:1/RoCE"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
}

func TestManyFilesOneRun(t *testing.T) {
	// Per-pod logs given separately add up to one run.
	all, err := os.ReadFile(filepath.Join("testdata", "mixed_ranks.log"))
	if err != nil {
		t.Fatal(err)
	}
	var a, b strings.Builder
	for _, l := range strings.SplitAfter(string(all), "\n") {
		if strings.Contains(l, "face-trainer-0/") {
			a.WriteString(l)
		} else {
			b.WriteString(l)
		}
	}
	r, err := Parse([]string{"a", "b"}, []io.Reader{strings.NewReader(a.String()), strings.NewReader(b.String())})
	if err != nil {
		t.Fatal(err)
	}
	if r.Transport != TransportMixed || len(r.Ranks) != 4 {
		t.Errorf("transport %s with %d ranks, want mixed with 4", r.Transport, len(r.Ranks))
	}
}

func TestEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, log, transport, problem, noProblem string
	}{
		{name: "empty", log: "", transport: TransportUnknown},
		{name: "single node, P2P only", log: "n1:10:11 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\nn1:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\nn1:12:13 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE\n", transport: TransportUnknown, problem: "SINGLE_NODE"},
		{name: "WARN with source location", log: "h:1:2 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with status=12 opcode=0\nh:1:2 [0] NCCL INFO Using network IB\n", transport: TransportIB, problem: "NCCL_WARN"},
		{name: "no OOB interface", log: "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth1\nh:1:1 [0] NCCL INFO Bootstrap : no socket interface found\n", transport: TransportUnknown, problem: "NO_OOB_INTERFACE"},
		{name: "tests without INFO", log: "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n     1048576        262144     float     sum      -1    100.0   10.00   15.00      0    100.0   10.00   15.00      0\n# Avg bus bandwidth    : 15.0\n", transport: TransportUnknown, problem: "NO_NCCL_INFO"},
		{name: "IBext plugin with proxy rank in the channel", log: "h1:1:2 [0] NCCL INFO NET/IBext : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\nh1:1:2 [0] NCCL INFO Using network IBext\nh1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\nh1:1:2 [0] NCCL INFO Channel 00/1 : 1[0] -> 0[0] [receive] via NET/IBext/0(1)/GDRDMA\nh2:1:2 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\nh2:1:2 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[0] [receive] via NET/IBext/0(0)/GDRDMA\n", transport: "IBext"},
		{name: "receiver not ready, status 13", log: "a:1:2 [0] NCCL INFO Using network IB\na:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with status=13 opcode=0 len=0 vendor err 136 (Send)\n", transport: TransportIB, problem: "IB_RNR_RETRY_EXCEEDED"},
		{name: "remote access error, status 10", log: "a:1:2 [0] NCCL INFO Using network IB\na:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with error 10, opcode 1, len 0, vendor err 136 (Recv)\n", transport: TransportIB, problem: "IB_REMOTE_ACCESS"},
		{name: "pre-2.12 completion error without peer", log: "a:1:2 [0] NCCL INFO Using network IB\na:1:2 [0] transport/net_ib.cc:795 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129\n", transport: TransportIB, problem: "IB_RETRY_EXCEEDED"},
		{name: "NET/IB without an IP interface falls back", log: "a:1:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to net9\n\na:1:2 [0] transport/net_ib.cc:170 NCCL WARN NET/IB : No IP interface found.\na:1:2 [0] NCCL INFO Using network Socket\nb:1:2 [0] NCCL INFO Using network Socket\n", transport: TransportSocket, problem: "SOCKET_FALLBACK"},
		{name: "2.28 OOB net interface not found", log: "a:1:2 [0] NCCL INFO NCCL_OOB_NET_IFNAME set to eth9\n\na:1:2 [0] bootstrap.cc:528 NCCL WARN no device found matching eth9, verify NCCL_OOB_NET_IFNAME\n", transport: TransportUnknown, problem: "NO_OOB_INTERFACE", noProblem: "NO_TRANSPORT"},
		{name: "ibv_modify_qp retried and succeeded", log: "a:1:2 [0] NCCL INFO Using network IB\na:1:2 [0] NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2, retrying 1/3 after 500 msec of sleep\n", transport: TransportIB, noProblem: "IB_MODIFY_QP"},
		{name: "ranks set NCCL_IB_HCA differently", log: "a:1:2 [0] NCCL INFO NCCL_IB_HCA set to =mlx5_0\na:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB net1:10.0.0.1<0>\na:1:2 [0] NCCL INFO Using network IB\nb:1:2 [0] NCCL INFO NCCL_IB_HCA set to =mlx5_9\nb:1:2 [0] NCCL INFO NET/IB : No device found.\nb:1:2 [0] NCCL INFO Using network Socket\n", transport: TransportMixed, problem: "MIXED_TRANSPORT:ranks set NCCL_IB_HCA differently (=mlx5_0 on a; =mlx5_9 on b)"},
		{name: "unknown and binary lines never break it", log: "\x00\xff\xfe garbage :::: [[[ ]]] NCCL\nhost:notapid:1 [0] NCCL INFO x\nh:1:1 [0] NCCL INFO Channel 00/0 : via NET/\nh:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/99999999999999999999/GDRDMA\n", transport: TransportIB},
		{name: "wrong results", log: "     1048576        262144     float     sum      -1    100.0   10.00   15.00      3    100.0   10.00   15.00      0\n", transport: TransportUnknown, problem: "WRONG_RESULTS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]string{"x"}, []io.Reader{strings.NewReader(tc.log)})
			if err != nil {
				t.Fatal(err)
			}
			if r.Transport != tc.transport {
				t.Errorf("transport %s, want %s", r.Transport, tc.transport)
			}
			if tc.problem != "" {
				code, sub, _ := strings.Cut(tc.problem, ":")
				found := false
				for _, p := range r.Problems {
					found = found || (p.Code == code && strings.Contains(p.Message, sub))
				}
				if !found {
					t.Errorf("missing %s in %+v", tc.problem, r.Problems)
				}
			}
			for _, p := range r.Problems {
				if tc.noProblem != "" && p.Code == tc.noProblem {
					t.Errorf("unexpected %s: %s", p.Code, p.Message)
				}
			}
		})
	}
}

func TestRDMA(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		want            bool
	}{
		{name: "NET/IB on InfiniBand", transport: TransportIB, want: true},
		{name: "NET/IB on RoCE", transport: TransportRoCE, want: true},
		{name: "HPC-X verbs plugin", transport: "IBext_v8", want: true},
		{name: "aws-ofi-nccl, old name", transport: "AWS Libfabric", want: true},
		{name: "aws-ofi-nccl", transport: "Libfabric", want: true},
		{name: "sockets", transport: TransportSocket, want: false},
		{name: "mixed", transport: TransportMixed, want: false},
		{name: "unknown", transport: TransportUnknown, want: false},
		{name: "TCP plugin", transport: "GPUDirectTCPX", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RDMA(tc.transport); got != tc.want {
				t.Errorf("RDMA(%q) = %v, want %v", tc.transport, got, tc.want)
			}
		})
	}
}

// FuzzParse: the log reader never panics and always yields a transport and a GDR verdict.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.log")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("h:1:1 [x] NCCL INFO comm 0x1 rank 99999999999999999999 nranks 1 cudaDev 0\n"))
	f.Add([]byte("[1,0]<stdout>:[pod/a/b] 2024-01-01T00:00:00Z h:1:1 [0] NCCL INFO Channel 00/0 : via NET/IB/0/GDRDMA\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse([]string{"fuzz"}, []io.Reader{bytes.NewReader(data)})
		if err != nil {
			return
		}
		if r.Transport == "" {
			t.Fatal("empty transport")
		}
		switch r.GDRVerdict {
		case GDRYes, GDRNo, GDRPartial, GDRUnknown:
		default:
			t.Fatalf("GDR verdict %q", r.GDRVerdict)
		}
		_ = r.WriteJSON(io.Discard)
		_ = r.WriteText(io.Discard, true)
	})
}
