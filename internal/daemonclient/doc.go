// Package daemonclient is the protocol between rdmanet's thin clients and
// the node daemon (rdmanet-daemon), and those clients' side of it. It is
// linked by the binaries exec'd on every CNI call (the rdmanet shim, the
// thin sriov, rdma and rdmanet-ipam plugins), so it links no Kubernetes
// client, no TLS, no HTTP and no netlink (test/depcheck.ThinPlugin keeps it
// so): a client starts, sends one JSON message over a unix socket and prints
// the answer.
//
// The protocol (wire.go, conn.go): one connection per CNI call. The shim
// writes one JSON Request and closes its write side; the daemon answers with
// one JSON Response and closes the connection. The exec'd delegate plugins
// (sriov, rdma, rdmanet-ipam, also installed as whereabouts) speak the same
// way on the daemon's plugin socket with PluginRequest and PluginResponse.
//
// The plugins' client (forward.go, exec.go): an exec'd rdmanet delegate
// plugin hands its call to the node's rdmanet-daemon, which runs the same
// code in-process with warm API clients and caches, and prints the daemon's
// answer as its own. When no daemon answers, or the daemon declines (another
// build, a test failpoint that must kill a process), the plugin does the
// work itself: it replaces its own process with the plugin's direct binary
// (sriov-direct, rdma-direct, rdmanet-ipam-direct), which runs the call as
// the upstream plugin would. Nothing depends on the daemon for correctness.
//
// The readiness check (probe.go): `rdmanet-daemon --probe` in an image
// without a shell (replacing `test -S`): the daemon's socket exists, is a
// socket, and the daemon answers on it.
package daemonclient
