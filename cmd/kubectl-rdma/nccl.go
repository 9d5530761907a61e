package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/rdmanet/rdmanet/internal/nccl"
)

func init() { register(newNCCLCmd) }

func newNCCLCmd(s streams) *cobra.Command {
	var output string
	var baseline []string
	cmd := &cobra.Command{
		Use:   "nccl LOG...",
		Short: "Read NCCL logs and nccl-tests output: transport, GPUDirect RDMA, env, named problems, bandwidth",
		Long: `nccl reads the logs of one run (files, or - for stdin) as they are pasted:
NCCL_DEBUG=INFO (or WARN) output of one or many ranks, interleaved or one file
per pod, NCCL 2.3 to 2.28 formats, and nccl-tests output. Whatever precedes
NCCL's host:pid:tid [dev] part is skipped: NCCL's own timestamps, mpirun
--tag-output, kubectl logs --prefix and --timestamps, torchrun --tee, log
collector columns; ANSI colour codes are removed. Other lines are ignored.

It reports the transport per rank and overall: IB or RoCE (NET/IB, told apart
by the link layer of the HCAs the channels use), Socket, a network plugin by
the name NCCL gives it (IBext_v8, Libfabric, AWS Libfabric, ...), mixed, or
unknown; GPUDirect RDMA from the network channels (yes, no, partial, unknown);
the HCAs, the out-of-band interface, the NCCL variables the log reports
("set by environment to", "set to"), the NCCL version and the nccl-tests
table with the average bus bandwidth (GB/s, as nccl-tests prints it).

It names each problem it recognises, with its fix: the silent fallback to
sockets (no RDMA device, no libibverbs), IB disabled or failed to initialise
(when that is all the log shows), ranks on different transports (socket type
mismatch, IB and RoCE ports), no interface for NCCL_SOCKET_IFNAME, completion
errors (status 12 retry exceeded, 13, local protection 4, remote access 10),
ibv_modify_qp failures, locked-memory limits, unreachable peers, no GPUDirect
RDMA, and a log without NCCL lines.

Run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET for the lines it needs
(add ENV to see the NCCL variables).

Exit status: 0 nothing above warning, 1 an error-level problem (socket
fallback, mixed transports, no bootstrap interface, IB completion or QP errors,
memlock, unreachable peer, wrong results), 2 a log that cannot be read.`,
		Example: `  kubectl logs job/face-trainer --all-containers --prefix | kubectl rdma nccl -
  kubectl rdma nccl rank0.log rank1.log
  kubectl rdma nccl ib.log --baseline socket.log -o json   # IB against NCCL_IB_DISABLE=1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: exitInput, err: fmt.Errorf("nccl: give at least one log file or - (stdin)")}
			}
			if output != "text" && output != "json" {
				return &exitError{code: exitInput, err: fmt.Errorf("nccl: -o %q: want text or json", output)}
			}
			rep, err := readNCCL(args, s.in)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if len(baseline) > 0 {
				b, err := readNCCL(baseline, s.in)
				if err != nil {
					return &exitError{code: exitInput, err: fmt.Errorf("baseline: %w", err)}
				}
				rep.CompareTo(b)
			}
			if output == "json" {
				err = rep.WriteJSON(s.out)
			} else {
				err = rep.WriteText(s.out, isTerminal(s.out))
			}
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}
			if rep.Worst() == "error" {
				return &exitError{code: exitFindings}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringSliceVar(&baseline, "baseline", nil, "log(s) of a baseline run to compare against (e.g. with NCCL_IB_DISABLE=1)")
	return cmd
}

func readNCCL(paths []string, stdin io.Reader) (*nccl.Report, error) {
	var readers []io.Reader
	for _, p := range paths {
		if p == "-" {
			readers = append(readers, stdin)
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		readers = append(readers, f)
	}
	return nccl.Parse(paths, readers)
}
