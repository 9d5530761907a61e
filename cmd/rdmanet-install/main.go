// Command rdmanet-install is the rdmanet-node DaemonSet's CNI-install step:
// it installs rdmanet's CNI binaries, config and kubeconfigs on the node
// (or removes them with --uninstall). See internal/install and --help.
package main

import (
	"os"

	"github.com/rdmanet/rdmanet/internal/install"
)

func main() { os.Exit(install.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }
