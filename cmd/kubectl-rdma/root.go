package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit codes shared by all subcommands.
const (
	exitOK       = 0
	exitFindings = 1 // lint found errors; nccl flagged a problem
	exitInput    = 2 // input unreadable or unparseable, bad usage
)

// exitError carries an exit code out of a subcommand. A nil err means the
// message was already printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// streams are the command's I/O, injected for tests.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// isTerminal tells whether w is a terminal (for colour).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// subcommands is the registry: every subcommand file adds its constructor in
// an init function, e.g.
//
//	func init() { register(newDoctorCmd) }
//
// so `doctor`, `demo` and `ipam gc` are added without touching this file.
var subcommands []func(streams) *cobra.Command

func register(f func(streams) *cobra.Command) { subcommands = append(subcommands, f) }

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-rdma",
		Short: "Check, diagnose and render RDMA networking for Kubernetes training pods",
		Long: `kubectl rdma checks and explains the RDMA data path of GPU training pods.

Modes (how a pod reaches the RDMA NIC):
  exclusive  one SR-IOV VF per pod (sriov + rdma CNI chain, VF device plugin pool)
  shared     many pods share one HCA (macvlan secondary net, shared device plugin pool)
  host       hostNetwork: the pod uses the node's NICs (dnsPolicy ClusterFirstWithHostNet)
  tcp        no RDMA on the data path

Exit codes: 0 ok, 1 problems found (lint errors, NCCL fallback), 2 unreadable input or bad usage.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Shown as "kubectl rdma" in usage lines when run as a kubectl plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl rdma"},
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	for _, f := range subcommands {
		root.AddCommand(f(s))
	}
	return root
}

// run executes the command line and returns the process exit code.
func run(args []string, in io.Reader, out, errw io.Writer) int {
	return execute(newRootCmd(streams{in: in, out: out, err: errw}), args, errw)
}

// execute runs cmd with args, prints its error to errw and returns the
// exit code (the tests drive single subcommands through it too).
func execute(cmd *cobra.Command, args []string, errw io.Writer) int {
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(errw, "kubectl rdma: %v\n", ee.err)
		}
		return ee.code
	}
	// Usage errors from cobra (unknown flag, wrong arg count).
	fmt.Fprintf(errw, "kubectl rdma: %v\n", err)
	return exitInput
}

func readAll(s streams) ([]byte, error) {
	if s.in == nil {
		return nil, fmt.Errorf("no standard input")
	}
	return io.ReadAll(s.in)
}
