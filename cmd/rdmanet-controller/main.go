// Command rdmanet-controller runs rdmanet's cluster-wide loops: IPAM garbage
// collection on pod deletion and node labels (internal/controller,
// docs/controller.md). Wiring only.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rdmanet/rdmanet/internal/controller"
	"github.com/rdmanet/rdmanet/internal/telemetry"
	"github.com/rdmanet/rdmanet/internal/version"
)

const program = "rdmanet-controller"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	o, err := controller.ParseFlags(args, os.Stderr)
	switch {
	case errors.Is(err, controller.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		return 2
	case o.Version:
		version.Print(os.Stdout, program)
		return 0
	}
	log, err := telemetry.NewLogger(os.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		return 2
	}
	o.Logger = logr.FromSlogHandler(log.Handler())
	ctrl.SetLogger(o.Logger)
	o.Logger.Info("starting", "version", version.Get(), "leaderElect", o.LeaderElect, "sweepInterval", o.SweepInterval)
	if err := controller.Run(ctrl.SetupSignalHandler(), o); err != nil {
		o.Logger.Error(err, "exiting")
		return 1
	}
	return 0
}
