// Command mkfixture writes the bundled simulated GPU node's sysfs tree
// (see sysfsfixture.NewStandard) into a directory.
package main

import (
	"fmt"
	"os"

	"github.com/rdmanet/rdmanet/test/sysfsfixture"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: mkfixture DIR   (writes the bundled fixture node's sysfs tree into DIR)")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "mkfixture:", err)
		os.Exit(1)
	}
	if _, err := sysfsfixture.NewStandard(dir, sysfsfixture.StandardOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "mkfixture:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "mkfixture: wrote the bundled fixture node to", dir)
}
