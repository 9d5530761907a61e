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
		Short: "Read NCCL_DEBUG=INFO logs and nccl-tests output: transport, GPUDirect RDMA, bandwidth",
		Long: `nccl reads the logs of one run (files, or - for stdin): NCCL_DEBUG=INFO output
of one or many ranks, interleaved or one file per pod, and nccl-tests output.
Launcher prefixes are stripped (mpirun --tag-output, kubectl logs --prefix and
--timestamps, torchrun --tee).

It reports the transport NCCL chose per rank and overall (IB, Socket, mixed,
unknown), whether GPUDirect RDMA is in use (/GDRDMA channels), the HCAs and the
out-of-band interface, the NCCL version and the nccl-tests table with the
average bus bandwidth (GB/s, as nccl-tests prints it).

It flags the silent fallback to sockets (NET/Socket without NCCL_IB_DISABLE)
and ranks that ended up on different transports.

Run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET for the lines it needs.

Exit status: 0 nothing above warning, 1 an error-level problem (socket
fallback, mixed transports, wrong results, no bootstrap interface), 2 a log
that cannot be read.`,
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
