// Command mkfixture writes the bundled simulated GPU node's sysfs tree
// (see sysfsfixture.NewStandard) into a directory.
//
//	mkfixture [--gpus N] DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rdmanet/rdmanet/internal/sysfsfixture"
)

func main() {
	fs := flag.NewFlagSet("mkfixture", flag.ContinueOnError)
	gpus := fs.Int("gpus", 0, fmt.Sprintf("NVIDIA H100 GPUs to add next to the NICs (0..%d; half on NUMA 0 under pci0000:40, half on NUMA 1 under pci0000:80/c0)", sysfsfixture.MaxStandardGPUs))
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mkfixture [--gpus N] DIR   (writes the bundled fixture node's sysfs tree into DIR, replacing it)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if err := run(fs.Arg(0), sysfsfixture.StandardOptions{GPUs: *gpus}); err != nil {
		fmt.Fprintln(os.Stderr, "mkfixture:", err)
		os.Exit(1)
	}
}

func run(dir string, o sysfsfixture.StandardOptions) error {
	if _, err := sysfsfixture.StandardGPUs(o.GPUs); err != nil {
		return fmt.Errorf("--gpus: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	s, err := sysfsfixture.NewStandard(dir, o)
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	fmt.Fprintf(os.Stderr, "mkfixture: wrote the bundled fixture node (%d GPUs) to %s\n", len(s.GPUs), dir)
	return nil
}
