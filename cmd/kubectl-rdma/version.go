package main

import (
	"github.com/spf13/cobra"

	"github.com/rdmanet/rdmanet/internal/version"
)

func init() { register(newVersionCmd) }

// newVersionCmd: `kubectl rdma version` (and --version, handled in main).
func newVersionCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the rdmanet version of this kubectl-rdma",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { version.Print(s.out, "kubectl-rdma") },
	}
}
