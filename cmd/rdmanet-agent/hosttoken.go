package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/rdmanet/rdmanet/internal/nodetoken"
)

// hostTokenFlags: the node's credential for the host-side binaries
// (docs/security.md "Identities"): the pod's projected token, copied to the
// file their kubeconfigs read.
type hostTokenFlags struct {
	source, dest string
}

func (f *hostTokenFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.source, "host-token-source", "", "the pod's projected ServiceAccount token (bound to this pod and node, expiring; kubelet rotates it): copied to --host-token-file whenever it changes")
	fs.StringVar(&f.dest, "host-token-file", "", "host file the host-side kubeconfigs read with tokenFile (rdmanet-install writes the first token there, e.g. /etc/cni/net.d/rdmanet.d/token): replaced atomically, mode 0600, within "+nodetoken.DefaultInterval.String()+" of every rotation")
}

// start copies the token once now (so the agent's own --kubeconfig, which
// reads the same file, starts with the current token) and then keeps it
// fresh until ctx ends. Nothing to do without the flags.
func (f hostTokenFlags) start(ctx context.Context, log *slog.Logger) error {
	if f.source == "" && f.dest == "" {
		return nil
	}
	if f.source == "" || f.dest == "" {
		return errors.New("--host-token-source and --host-token-file go together")
	}
	r := &nodetoken.Refresher{Source: f.source, Dest: f.dest, Log: log}
	if _, err := r.Sync(); err != nil {
		log.Error("node token not refreshed; retrying", "file", f.dest, "err", err)
	}
	go r.Run(ctx)
	return nil
}
