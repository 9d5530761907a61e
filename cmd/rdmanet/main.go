// Command rdmanet is the Multus-compatible meta CNI plugin.
package main

import "github.com/rdmanet/rdmanet/internal/cni/meta"

func main() { meta.Main() }
