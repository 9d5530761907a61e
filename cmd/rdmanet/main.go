// Command rdmanet is the Multus-compatible meta CNI plugin as the runtime
// calls it: a small shim that hands the call to the rdmanet daemon, or runs
// rdmanet-direct when no daemon answers.
package main

import "github.com/rdmanet/rdmanet/internal/cni/meta/shim"

func main() { shim.Main() }
