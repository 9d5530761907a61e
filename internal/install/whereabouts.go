package install

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// MigrationDoc is where the operator reads how to move Whereabouts
// networks to rdmanet-ipam.
const MigrationDoc = `docs/deploy.md "Migrating from Whereabouts"`

// WhereaboutsOwner says whose <binDir>/whereabouts is: "" when there is
// none, "rdmanet" when it is rdmanet's rdmanet-ipam (per its Go build info),
// else a description of the other binary. Used by the installer and by
// `kubectl rdma doctor`.
func WhereaboutsOwner(binDir string) (owner string, err error) {
	p := filepath.Join(binDir, Whereabouts)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	b, err := inspect.File(p)
	switch {
	case err != nil:
		return "not a Go binary (" + err.Error() + ")", nil
	case b.Is(IPAMBinary):
		return "rdmanet", nil
	default:
		return b.String(), nil
	}
}

type wbDecision struct {
	install bool
	what    string // for the report
	logs    []func(*slog.Logger)
}

// decideWhereabouts: whether rdmanet-ipam is also installed as
// "whereabouts". auto: only where none is, or the one there is rdmanet's;
// true: also over another one with Force, else an error; false: never.
func (o *Options) decideWhereabouts(old *Manifest) (wbDecision, error) {
	p := filepath.Join(o.CNIBinDir, Whereabouts)
	if o.AsWhereabouts == WhereaboutsFalse {
		d := wbDecision{what: "not requested"}
		if owner, _ := WhereaboutsOwner(o.CNIBinDir); owner != "" && !(old != nil && slices.ContainsFunc(old.Files, func(e Entry) bool { return e.Root == rootBin && e.Path == Whereabouts })) {
			d.logs = append(d.logs, func(l *slog.Logger) {
				l.Info("not installing rdmanet-ipam as whereabouts (--install-as-whereabouts=false); the whereabouts there is not from an rdmanet install and stays", "file", p, "binary", owner)
			})
		}
		return d, nil
	}
	owner, err := WhereaboutsOwner(o.CNIBinDir)
	if err != nil {
		return wbDecision{}, fmt.Errorf("whereabouts: %w", err)
	}
	if owner == "" {
		return wbDecision{install: true, what: "installed", logs: []func(*slog.Logger){func(l *slog.Logger) {
			l.Info("installing rdmanet-ipam as whereabouts: no whereabouts binary is there", "file", p, "mode", o.AsWhereabouts)
		}}}, nil
	}
	if owner == "rdmanet" || o.ownedByManifest(old, p) {
		return wbDecision{install: true, what: "installed", logs: []func(*slog.Logger){func(l *slog.Logger) {
			l.Info("installing rdmanet-ipam as whereabouts: the whereabouts there is rdmanet's own", "file", p, "mode", o.AsWhereabouts)
		}}}, nil
	}
	if o.AsWhereabouts == WhereaboutsTrue {
		if !o.Force {
			return wbDecision{}, fmt.Errorf("%w: %s is %s, not rdmanet's; --install-as-whereabouts=true does not replace it without --force "+
				"(every network with \"type\": \"whereabouts\" would move to rdmanet-ipam's store, which does not know Whereabouts' allocations); "+
				"fix: --install-as-whereabouts=auto to leave it, or follow %s and then pass --force", ErrForeignWhereabouts, p, owner, MigrationDoc)
		}
		return wbDecision{install: true, what: "installed (replaced another whereabouts)", logs: []func(*slog.Logger){func(l *slog.Logger) {
			l.Warn("replacing another project's whereabouts with rdmanet-ipam (--install-as-whereabouts=true --force): networks with \"type\": \"whereabouts\" now use rdmanet-ipam",
				"file", p, "was", owner)
		}}}, nil
	}
	return wbDecision{what: "skipped (another whereabouts is installed)", logs: []func(*slog.Logger){func(l *slog.Logger) {
		l.Warn("not installing rdmanet-ipam as whereabouts: another whereabouts is installed and is left untouched; networks with \"type\": \"whereabouts\" keep using it, "+
			"use \"type\": \"rdmanet-ipam\" for rdmanet's IPAM, or see "+MigrationDoc, "file", p, "binary", owner)
	}}}, nil
}

// ownedByManifest: the file is the one an earlier rdmanet install wrote.
func (o *Options) ownedByManifest(m *Manifest, path string) bool {
	if m == nil {
		return false
	}
	i := slices.IndexFunc(m.Files, func(e Entry) bool { return e.Root == rootBin && e.Path == Whereabouts })
	if i < 0 {
		return false
	}
	sum, err := hashFile(path)
	return err == nil && m.Files[i].owns(sum)
}
