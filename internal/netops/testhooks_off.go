//go:build !rdmanet_testhooks

package netops

// builtWithTestHooks: this is a production build (no rdmanet_testhooks tag).
const builtWithTestHooks = false
