// Package netops is the only package of rdmanet that talks netlink. It holds
// the host-facing operations the CNI plugins, the agent and the tests need:
//
//   - link operations on real netdevs in the calling thread's network
//     namespace (look up, move, rename, MTU, MAC, up/down, veth for tests);
//   - VF configuration through its PF (VFConfigurator) and RDMA device
//     netns handling (RDMA), each with two implementations: Netlink, which
//     talks to the kernel, and Recorder, a recording fake that keeps VF and
//     RDMA state in a locked file (so separate plugin processes share it) and
//     logs every operation in `ip`/`rdma` command form;
//   - file locks and atomic writes used for the plugins' state caches.
//
// The plugins pick the implementation with FromEnv:
//
//	RDMANET_NETOPS         "" or "netlink" (default): the kernel; "record": the fake
//	RDMANET_NETOPS_STATE   the fake's state file (required with "record");
//	                       its operation log is written next to it as <file>.log
//
// "record" and the RDMANET_CNI_FAULT failpoints are test switches: only
// binaries built with -tags rdmanet_testhooks (TestHooksTag) and `go test`
// binaries honour them. A production build refuses RDMANET_NETOPS=record
// (except for DEL, which it runs against the kernel) and ignores
// RDMANET_CNI_FAULT, with a warning (see FromEnv).
package netops
