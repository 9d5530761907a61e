package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rdmanet/rdmanet/internal/sim"
	"github.com/rdmanet/rdmanet/internal/textout"
)

func init() { register(newDemoCmd) }

func newDemoCmd(s streams) *cobra.Command {
	var o sim.Options
	var output string
	var cleanup bool
	cmd := &cobra.Command{
		Use:   "demo [--pods N] [--keep] [-o table|json] | demo --cleanup",
		Short: "Run rdmanet end to end on simulated GPU nodes: exclusive, shared and host mode (root)",
		Long: `demo builds simulated GPU nodes on this machine and runs the real rdmanet
components against them: the node agent's device plugin pools, a kubelet
stand-in (Device Plugin API allocation incl. GetPreferredAllocation, the
PodResources API), the rdmanet meta CNI exec'd through libcni as a container
runtime does, and sriov, rdma, macvlan, bridge, host-local and rdmanet-ipam
behind it. It attaches --pods pods per mode in parallel, prints what each
got, detaches them and checks that the simulated hosts are exactly as before.

  exclusive  the seed's face-trainer Job on the face-training-rdma NAD
             (sriov -> rdma -> Whereabouts config served by rdmanet-ipam)
  shared     pods on the seed's rdmashared-net macvlan network, sharing an HCA
  host       the seed's hostNetwork worker with a shared HCA slot

InfiniBand (only when asked for with --mode; make demo-ib runs both):
  ib-exclusive  ib-sriov-cni's NAD unchanged: an IB VF per pod with a GUID
                from the node's GUID pool, the network's PKey
  ib-shared     ipoib-cni's NAD unchanged: an IPoIB child of the IB port

Simulated, and said so in the output: PF/VF netdevs are veth ends, sysfs is
a fixture tree, VF settings and RDMA netns moves are recorded (netops
recorder), not done by a kernel. Exclusive and shared mode need different
RDMA netns modes, so they run on two simulated nodes (and the IB modes on
two more). Everything lives in
network namespaces named rdmademo-*; the namespace the demo runs in is not
touched.

Needs root and network namespaces (exit 2 says what is missing). The plugin
binaries come from --bin-dir (default: the directory of this binary; 'make
demo' builds them into bin/testhooks/); sriov and rdma must be builds with
-tags rdmanet_testhooks, the only ones that accept the recording fake. One
demo per --work-dir: a second run while one is kept up refuses and names it.

Progress and timing go to stderr; the table (or -o json: one object) to stdout.
Exit codes: 0 clean, 1 a pod failed or the host was not left as it was, 2 missing prerequisites or bad usage.`,
		Example: `  sudo kubectl rdma demo
  sudo kubectl rdma demo --pods 8 -o json
  sudo kubectl rdma demo --mode ib-exclusive,ib-shared
  sudo kubectl rdma demo --keep && sudo ip netns exec rdmademo-face-trainer-0 ip -br addr
  sudo kubectl rdma demo --cleanup`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return &exitError{code: exitInput, err: fmt.Errorf("-o %q: want table or json", output)}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cleanup {
				res, err := sim.Cleanup(ctx, o.WorkDir, s.err)
				if res != nil {
					if output == "json" {
						if jerr := textout.WriteJSON(s.out, res); jerr != nil {
							return &exitError{code: exitFindings, err: jerr}
						}
					} else if !res.Found {
						fmt.Fprintf(s.out, "no demo to clean up in %s\n", o.WorkDir)
					} else {
						fmt.Fprintf(s.out, "cleaned up %d pods; host check: %s\n", res.Pods, res.Cleanup)
					}
				}
				return demoExit(err)
			}
			if o.BinDir == "" {
				exe, err := os.Executable()
				if err != nil {
					return &exitError{code: exitInput, err: fmt.Errorf("find the plugin binaries: %w; fix: pass --bin-dir", err)}
				}
				o.BinDir = filepath.Dir(exe)
			}
			o.Progress = s.err
			if strings.Contains(os.Args[0], "/") { // run by path (bin/kubectl-rdma), not through kubectl
				o.CleanupCommand = os.Args[0] + " demo --cleanup"
			}
			rep, err := sim.Run(ctx, o)
			if rep != nil {
				var werr error
				if output == "json" {
					werr = sim.WriteJSON(s.out, rep)
				} else {
					werr = sim.WriteTable(s.out, rep)
				}
				if werr != nil && err == nil {
					err = werr
				}
				if err == nil && rep.Cleanup != "clean" && !rep.Summary.Kept {
					return &exitError{code: exitFindings, err: fmt.Errorf("the simulated hosts were not left as they were: %s", rep.Cleanup)}
				}
			}
			return demoExit(err)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Pods, "pods", sim.DefaultPods, fmt.Sprintf("pods per mode, attached in parallel (1-%d)", sim.MaxPods))
	fl.BoolVar(&o.Keep, "keep", false, "leave the pods attached for inspection; prints the commands to look and to clean up")
	fl.StringVarP(&output, "output", "o", "table", "table or json (one object)")
	fl.BoolVar(&cleanup, "cleanup", false, "detach and remove a demo kept up with --keep (or left by a run that died), and check the hosts")
	fl.StringVar(&o.WorkDir, "work-dir", sim.DefaultWorkDir, "state, fixtures and sockets of the demo; one demo per directory")
	fl.StringVar(&o.BinDir, "bin-dir", "", "directory with the CNI plugin binaries (default: this binary's directory)")
	fl.StringSliceVar(&o.Modes, "mode", nil, "modes to run (exclusive, shared, host, ib-exclusive, ib-shared; default exclusive,shared,host)")
	fl.IntVar(&o.Cycles, "rounds", 1, "attach + detach rounds; the host check runs after each")
	return cmd
}

// demoExit maps engine errors to exit codes: 2 for missing prerequisites
// and a busy work dir, 1 for everything else.
func demoExit(err error) error {
	if err == nil {
		return nil
	}
	var pe *sim.PrereqError
	var be *sim.BusyError
	if errors.As(err, &pe) || errors.As(err, &be) {
		return &exitError{code: exitInput, err: fmt.Errorf("demo: %w", err)}
	}
	return &exitError{code: exitFindings, err: fmt.Errorf("demo: %w", err)}
}
