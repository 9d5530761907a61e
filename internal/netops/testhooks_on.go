//go:build rdmanet_testhooks

package netops

// builtWithTestHooks: this binary was built with -tags rdmanet_testhooks.
const builtWithTestHooks = true
