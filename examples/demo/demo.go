// Package demo holds the manifests `kubectl rdma demo` runs on its simulated
// nodes: the seed scenarios' pool configs, NADs and pod templates. They are
// embedded so the demo binary works outside the source tree.
package demo

import "embed"

// FS holds every *.yaml of this directory.
//
//go:embed *.yaml
var FS embed.FS
