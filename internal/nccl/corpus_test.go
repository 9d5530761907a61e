package nccl

import (
	"strings"
	"testing"
)

// corpusCase is one fixture of testdata/ (see testdata/README.md for the
// format each reproduces) and what the reader must make of it.
type corpusCase struct {
	name      string
	file      string
	transport string
	gdr       string // GDR verdict
	linkLayer string // of every listed rank whose HCAs the log names, when set
	// problems must be reported (code, or code:substring of its message);
	// noProblems must not.
	problems   []string
	noProblems []string
	env        map[string]string
	worst      string // "-" for none; "" not checked
}

var corpus = []corpusCase{
	// The fixtures the reader was first written against.
	{name: "RoCE with GDR, mpirun -np 4", file: "ib_gdr.log", transport: TransportRoCE, gdr: GDRYes, linkLayer: "RoCE", noProblems: []string{"NO_GDR", "SOCKET_FALLBACK"}, worst: "-"},
	{name: "RoCE without GDR, 2.18 channel format", file: "ib_nogdr.log", transport: TransportRoCE, gdr: GDRNo, problems: []string{"NO_GDR"}},
	{name: "socket fallback, no device", file: "socket_fallback.log", transport: TransportSocket, gdr: GDRNo, problems: []string{"SOCKET_FALLBACK:found no device"}, worst: "error"},
	{name: "socket baseline, mpirun --tag-output", file: "socket_baseline.log", transport: TransportSocket, gdr: GDRNo, problems: []string{"SOCKET_BASELINE"}, noProblems: []string{"SOCKET_FALLBACK", "IB_DISABLED_OR_FAILED"}, worst: "info"},
	{name: "mixed ranks, kubectl logs --prefix", file: "mixed_ranks.log", transport: TransportMixed, gdr: GDRPartial, problems: []string{"MIXED_TRANSPORT:NET/IB found no device on face-trainer-1"}},

	// Prefixes before host:pid:tid, timestamps, ANSI.
	{name: "2.28 timestamped WARN: no interface for NCCL_SOCKET_IFNAME", file: "v2_28_ts_warn_no_ifname.log", transport: TransportUnknown, gdr: GDRUnknown,
		problems: []string{"NO_OOB_INTERFACE:NCCL_SOCKET_IFNAME==net1"}, noProblems: []string{"NO_TRANSPORT", "NO_NCCL_LINES", "NO_NCCL_INFO"},
		env: map[string]string{"NCCL_SOCKET_IFNAME": "=net1"}, worst: "error"},
	{name: "2.28 all lines timestamped, RoCE, GDR (PCI mode)", file: "v2_28_roce_gdr_ts_all.log", transport: TransportRoCE, gdr: GDRYes, linkLayer: "RoCE", noProblems: []string{"NO_GDR"}, worst: "-"},
	{name: "mpirun --tag-output, 2.19, IB link layer", file: "mpirun_tag_output_ib_v2_19.log", transport: TransportIB, gdr: GDRYes, linkLayer: "IB", worst: "-"},
	{name: "kubectl logs --prefix with ANSI colours", file: "kubectl_prefix_ansi.log", transport: TransportRoCE, gdr: GDRYes,
		env: map[string]string{"NCCL_SOCKET_IFNAME": "net1", "NCCL_IB_GID_INDEX": "3"}, worst: "-"},
	{name: "kubectl logs --timestamps, GDR off for lack of nvidia-peermem", file: "kubectl_timestamps_nogdr.log", transport: TransportRoCE, gdr: GDRNo, problems: []string{"NO_GDR:nvidia-peermem"}},
	{name: "log collector columns and glued timestamps", file: "log_collector_columns.log", transport: TransportRoCE, gdr: GDRYes, env: map[string]string{"NCCL_SOCKET_IFNAME": "eth0"}, worst: "-"},
	{name: "torchrun [defaultN]: prefixes, no RDMA device", file: "no_device_torchrun_prefix.log", transport: TransportSocket, gdr: GDRNo, problems: []string{"SOCKET_FALLBACK:bert-0, bert-1"}},

	// Env lines.
	{name: "2.7 env lines: set to, set by environment to", file: "env_set_to_v2_7.log", transport: TransportRoCE, gdr: GDRYes,
		env: map[string]string{"NCCL_SOCKET_IFNAME": "=net1", "NCCL_IB_HCA": "=mlx5_2", "NCCL_IB_GID_INDEX": "3"}, worst: "-"},

	// IB disabled versus IB failed.
	{name: "2.28 NCCL_IB_DISABLE=1 without ENV lines", file: "v2_28_ib_disabled_no_env.log", transport: TransportSocket, gdr: GDRNo,
		problems: []string{"IB_DISABLED_OR_FAILED:disabled or failed to initialise"}, noProblems: []string{"SOCKET_FALLBACK", "NO_TRANSPORT"}, worst: "warning"},
	{name: "2.28 NCCL_IB_DISABLE=1 reported, custom timestamp format", file: "v2_28_ib_disabled_env_ts.log", transport: TransportSocket, gdr: GDRNo,
		problems: []string{"SOCKET_BASELINE"}, noProblems: []string{"SOCKET_FALLBACK", "IB_DISABLED_OR_FAILED"}, env: map[string]string{"NCCL_IB_DISABLE": "1"}, worst: "info"},
	{name: "no libibverbs in the image", file: "no_libibverbs_v2_21.log", transport: TransportSocket, gdr: GDRNo, problems: []string{"SOCKET_FALLBACK:libibverbs"}, worst: "error"},
	{name: "single node, NVLink only", file: "single_node_nvlink_v2_21.log", transport: TransportUnknown, gdr: GDRUnknown, problems: []string{"SINGLE_NODE"}, noProblems: []string{"SOCKET_FALLBACK"}},

	// Network plugins.
	{name: "HPC-X IBext_v8 plugin with SHARP", file: "hpcx_ibext_v8.log", transport: "IBext_v8", gdr: GDRYes, linkLayer: "IB", worst: "-"},
	{name: "aws-ofi-nccl Libfabric (EFA), 2.23", file: "efa_libfabric_v2_23.log", transport: "Libfabric", gdr: GDRYes, worst: "-"},
	{name: "aws-ofi-nccl AWS Libfabric, 2.4 Ring lines", file: "efa_aws_libfabric_v2_4.log", transport: "AWS Libfabric", gdr: GDRNo, problems: []string{"NO_GDR"}},

	// Mixed transports.
	{name: "one node with NCCL_IB_DISABLE=1, socket type mismatch", file: "mixed_ib_disabled_one_node_v2_18.log", transport: TransportMixed, gdr: GDRPartial,
		problems: []string{"MIXED_TRANSPORT:wrong type 3 != 4", "MIXED_TRANSPORT:NCCL_IB_DISABLE=1 on gpu-a only"}, worst: "error"},
	{name: "socket type mismatch seen from the IB side only", file: "mismatch_one_side_v2_21.log", transport: TransportMixed, gdr: GDRUnknown, problems: []string{"MIXED_TRANSPORT:socket type 3 is NET/Socket"}},
	{name: "IB and RoCE ports in one communicator", file: "incompatible_link_layers_v2_23.log", transport: TransportMixed, gdr: GDRYes, problems: []string{"MIXED_TRANSPORT:NCCL_IB_HCA"}},

	// Old formats.
	{name: "2.3 Ring lines, sideband interface, internal Network", file: "nccl_2_3_ib.log", transport: TransportIB, gdr: GDRYes, linkLayer: "IB", worst: "-"},
	{name: "2.5 Ring lines with busId, IB_DISABLE=0", file: "nccl_2_5_ib.log", transport: TransportIB, gdr: GDRYes, noProblems: []string{"SOCKET_BASELINE"}, env: map[string]string{"NCCL_IB_DISABLE": "0"}, worst: "-"},
	{name: "2.7 Channel lines, GDR off by distance", file: "nccl_2_7_roce_distance.log", transport: TransportRoCE, gdr: GDRNo, problems: []string{"NO_GDR"}},

	// Completion and QP errors.
	{name: "2.21 status=12 retry exceeded, then a flush", file: "status12_v2_21.log", transport: TransportRoCE, gdr: GDRYes,
		problems: []string{"IB_RETRY_EXCEEDED:status 12", "IB_COMPLETION_ERROR:IBV_WC_WR_FLUSH_ERR"}, worst: "error"},
	{name: "2.28 IBV_WC_RETRY_EXC_ERR(12), timestamped", file: "status12_v2_28_ts.log", transport: TransportIB, gdr: GDRYes, problems: []string{"IB_RETRY_EXCEEDED"}},
	{name: "2.18 local protection error 4", file: "local_protection_v2_18.log", transport: TransportRoCE, gdr: GDRYes, problems: []string{"IB_LOCAL_PROTECTION:nvidia-peermem"},
		env: map[string]string{"NCCL_IB_HCA": "mlx5_4"}},
	{name: "2.18 ibv_modify_qp timed out", file: "modify_qp_v2_18.log", transport: TransportRoCE, gdr: GDRYes, problems: []string{"IB_MODIFY_QP:Connection timed out"}},
	{name: "2.28 ibv_modify_qp timed out after retries", file: "modify_qp_v2_28_ts.log", transport: TransportRoCE, gdr: GDRYes, problems: []string{"IB_MODIFY_QP:GID index"}},
	{name: "ibv_reg_mr out of locked memory", file: "memlock_v2_21.log", transport: TransportRoCE, gdr: GDRYes, problems: []string{"IB_MEMLOCK:IPC_LOCK"}},

	// InfiniBand.
	{name: "IB with NCCL_IB_GID_INDEX set: harmless", file: "ib_gid_index_set_v2_21.log", transport: TransportIB, gdr: GDRYes, linkLayer: "IB",
		problems: []string{"IB_GID_INDEX_IGNORED:harmless"}, env: map[string]string{"NCCL_IB_GID_INDEX": "3"}, worst: "info"},
	{name: "IB, NCCL_IB_HCA names a device never opened", file: "ib_hca_not_opened_v2_23.log", transport: TransportIB, gdr: GDRYes, linkLayer: "IB",
		problems: []string{"IB_HCA_NOT_OPENED:names mlx5_7 (on ib-trainer-shared-0, ib-trainer-shared-1)"}, noProblems: []string{"IB_GID_INDEX_IGNORED"}, worst: "warning"},
	{name: "IB, NCCL_IB_PKEY given a PKey value: QP fails at INIT", file: "ib_pkey_index_v2_28_ts.log", transport: TransportIB, gdr: GDRUnknown,
		problems: []string{"IB_PKEY_INDEX:0x8005", "IB_MODIFY_QP:PKey index (NCCL_IB_PKEY, default 0)"}, env: map[string]string{"NCCL_IB_PKEY": "32773"}, worst: "error"},

	// Logs without the lines that tell the transport.
	{name: "PyTorch error summary only", file: "pytorch_last_error_v2_14.log", transport: TransportUnknown, gdr: GDRUnknown, problems: []string{"NO_OOB_INTERFACE", "NO_NCCL_INFO"}, noProblems: []string{"NO_NCCL_LINES"}},
	{name: "2.27 no interface: address family error", file: "v2_27_ifname_family.log", transport: TransportUnknown, gdr: GDRUnknown, problems: []string{"NO_OOB_INTERFACE:NCCL_SOCKET_IFNAME=eth2"}, noProblems: []string{"NO_TRANSPORT"}},
	{name: "NCCL_DEBUG=WARN, peer reset", file: "warn_only_v2_21.log", transport: TransportUnknown, gdr: GDRUnknown, problems: []string{"NO_TRANSPORT:NCCL_DEBUG=WARN", "PEER_UNREACHABLE:Connection reset by peer"}},
	{name: "no NCCL lines at all", file: "no_nccl_lines.log", transport: TransportUnknown, gdr: GDRUnknown, problems: []string{"NO_NCCL_LINES"}, worst: "warning"},
}

func (tc corpusCase) verdictRight(r *Report) bool {
	return r.Transport == tc.transport && r.GDRVerdict == tc.gdr
}

func TestCorpus(t *testing.T) {
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			r := parseFiles(t, tc.file)
			if !tc.verdictRight(r) {
				t.Errorf("transport %q GDR %q, want %q %q", r.Transport, r.GDRVerdict, tc.transport, tc.gdr)
			}
			if tc.linkLayer != "" {
				if r.LinkLayer != tc.linkLayer {
					t.Errorf("link layer %q, want %q", r.LinkLayer, tc.linkLayer)
				}
				for _, rk := range r.Ranks {
					if len(rk.HCAs) > 0 && rk.LinkLayer != tc.linkLayer {
						t.Errorf("%s: link layer %q, want %q", rk.label(), rk.LinkLayer, tc.linkLayer)
					}
				}
			}
			for _, want := range tc.problems {
				code, sub, _ := strings.Cut(want, ":")
				if p := findProblem(r, code); p == nil {
					t.Errorf("missing problem %s in %+v", code, r.Problems)
				} else if !strings.Contains(p.Message+" "+p.Fix, sub) {
					t.Errorf("problem %s does not say %q: %s (fix: %s)", code, sub, p.Message, p.Fix)
				} else if p.Severity == "error" && p.Fix == "" {
					t.Errorf("error %s has no fix", code)
				}
			}
			for _, c := range tc.noProblems {
				if p := findProblem(r, c); p != nil {
					t.Errorf("unexpected problem %s: %s", c, p.Message)
				}
			}
			for k, v := range tc.env {
				if r.Env[k] != v {
					t.Errorf("env %s = %q, want %q (env %v)", k, r.Env[k], v, r.Env)
				}
			}
			switch w := r.Worst(); {
			case tc.worst == "-" && w != "":
				t.Errorf("worst severity %q, want none: %+v", w, r.Problems)
			case tc.worst != "" && tc.worst != "-" && w != tc.worst:
				t.Errorf("worst severity %q, want %q: %+v", w, tc.worst, r.Problems)
			}
		})
	}
}

// TestCorpusShare is the acceptance figure of the reader: the share of
// fixtures whose transport and GPUDirect RDMA verdict are both right
// (go test ./internal/nccl -run TestCorpusShare -v prints it).
func TestCorpusShare(t *testing.T) {
	right := 0
	for _, tc := range corpus {
		if tc.verdictRight(parseFiles(t, tc.file)) {
			right++
		}
	}
	share := float64(right) / float64(len(corpus))
	t.Logf("corpus: %d of %d fixtures (%.1f%%) with the right transport and GPUDirect RDMA verdict", right, len(corpus), 100*share)
	if share < 0.9 {
		t.Errorf("%.1f%% of the corpus read right, want at least 90%%", 100*share)
	}
}

// TestCorpusNamesEveryFailure: every fixture that is not a clean run gets
// at least one named problem with a fix.
func TestCorpusNamesEveryFailure(t *testing.T) {
	for _, tc := range corpus {
		if tc.worst == "-" || tc.worst == "info" {
			continue
		}
		r := parseFiles(t, tc.file)
		named := false
		for _, p := range r.Problems {
			named = named || (p.Code != "NCCL_WARN" && p.Fix != "")
		}
		if !named {
			t.Errorf("%s: no named problem with a fix: %+v", tc.file, r.Problems)
		}
	}
}

func findProblem(r *Report, code string) *Problem {
	for i := range r.Problems {
		if r.Problems[i].Code == code {
			return &r.Problems[i]
		}
	}
	return nil
}
