// Package install is the rdmanet-node DaemonSet's CNI-install step
// (cmd/rdmanet-install): it puts rdmanet's CNI binaries into the node's CNI
// bin directory and its config and kubeconfigs into the CNI config
// directory, and takes them out again with Uninstall. The image has no
// shell; this replaces the former install.sh.
//
// Install, in order:
//
//  1. reads the install manifest of an earlier run (the stamp:
//     <conf>/rdmanet.d/install.json) and refuses to replace a newer rdmanet
//     unless Force;
//  2. decides whether rdmanet-ipam is also installed as "whereabouts"
//     (AsWhereabouts: never over another project's whereabouts in auto);
//  3. checks every input (binaries, the projected token and CA, ConfigMap files) before
//     writing anything, and records what it is about to write;
//  4. writes each file atomically (temporary file in the same directory,
//     fsync, rename: a running plugin keeps its file), skipping files that
//     are already identical, the meta CNI config 00-rdmanet.conf last
//     (the runtime starts using rdmanet once it appears);
//  5. removes what an earlier install put there and this one no longer
//     installs, and writes the final manifest.
//
// Uninstall removes exactly the files the manifest lists, each only while it
// is still the file rdmanet wrote (or, for a binary, an rdmanet build of the
// same command), 00-rdmanet.conf first.
package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rdmanet/rdmanet/internal/version"
	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// DefaultBinaries are the CNI binaries the node needs: the meta CNI shim,
// the two drop-in plugins and the IPAM, each with its per-call fallback
// (the shim and the thin sriov, rdma and rdmanet-ipam hand calls to the
// daemon and become their -direct binary when none answers), and the two
// InfiniBand drop-ins under upstream's names, ib-sriov (ib-sriov-cni) and
// ipoib (ipoib-cni), which do their work themselves (no -direct).
var DefaultBinaries = []string{"rdmanet", "rdmanet-direct", "sriov", "sriov-direct", "rdma", "rdma-direct", "rdmanet-ipam", "rdmanet-ipam-direct", "ib-sriov", "ipoib"}

// File names and directories in the CNI config directory.
const (
	MetaConf      = "00-rdmanet.conf"
	IPAMConf      = "rdmanet-ipam.conf"
	GUIDPoolConf  = "guid-pool.json" // in IPAMDir: ib-sriov's GUID pool (guidpool.DefaultConfigPath)
	MetaDir       = "rdmanet.d"
	IPAMDir       = "rdmanet-ipam.d"
	ManifestName  = "install.json"
	Whereabouts   = "whereabouts"
	IPAMBinary    = "rdmanet-ipam"
	legacyTmpTail = ".rdmanet-tmp" // install.sh's temporary files
)

// Whereabouts modes.
const (
	WhereaboutsAuto  = "auto"
	WhereaboutsTrue  = "true"
	WhereaboutsFalse = "false"
)

// Identity is one kubeconfig the installer writes for host-side binaries:
// <CNIConfDir>/<Dir>/<Name>.kubeconfig. Every identity is the node's own
// (the rdmanet-node pod's ServiceAccount, bound to the pod and its node):
// they all read the one host token file, HostTokenFile, and its CA.
type Identity struct {
	Name, Dir string
}

// Identities: the meta CNI (rdmanet shim → rdmanet-direct, rdmanet-daemon,
// rdmanet-agent) and rdmanet-ipam (rdmanet-ipam-direct, in-process in the daemon).
var Identities = []Identity{
	{Name: "rdmanet", Dir: MetaDir},
	{Name: "rdmanet-ipam", Dir: IPAMDir},
}

// The node's credential on the host, under the CNI config directory: the
// projected ServiceAccount token of the rdmanet-node pod (rdmanet-install
// writes the first one, rdmanet-agent --host-token-file every rotation:
// internal/nodetoken) and the cluster CA. Releases before 0.3 copied a
// long-lived Secret token per identity to <Dir>/token instead; an install
// over one of them removes <IPAMDir>/token and <IPAMDir>/ca.crt and
// replaces <MetaDir>/token with the expiring one.
const (
	HostTokenFile = MetaDir + "/token"
	HostCAFile    = MetaDir + "/ca.crt"
)

// Files of the projected volume in TokenDir.
const (
	ProjectedToken = "token"
	ProjectedCA    = "ca.crt"
)

// Options are every path and switch of an install. Zero paths are not
// defaulted here: the command's flags carry the defaults (DefaultOptions).
type Options struct {
	// SrcDir holds the binaries to install (the image's /opt/rdmanet/bin);
	// Src, when set, is read instead (tests).
	SrcDir string
	Src    fs.FS
	// CNIBinDir is the node's CNI bin directory as mounted here.
	CNIBinDir string
	// CNIConfDir is the node's CNI config directory, mounted at the same
	// path as on the host: the kubeconfigs name files in it by that path.
	CNIConfDir string
	// ConfigDir holds 00-rdmanet.conf and rdmanet-ipam.conf (the ConfigMap).
	ConfigDir string
	// TokenDir is the pod's projected volume: token (the pod's bound,
	// expiring ServiceAccount token) and ca.crt (kube-root-ca.crt).
	TokenDir string
	// GUIDPoolConfig, when set, is the InfiniBand GUID pool config
	// (deploy/components/infiniband) to install as
	// <CNIConfDir>/rdmanet-ipam.d/guid-pool.json, the file ib-sriov reads
	// when RDMANET_GUID_POOL_CONFIG is unset: so the host fallback
	// (rdmanet-direct, while rdmanet-daemon is down) serves pool GUIDs too.
	// Unset: none is installed, and one an earlier install put there is
	// removed.
	GUIDPoolConfig string
	// Manifest is the stamp file (default <CNIConfDir>/rdmanet.d/install.json).
	Manifest string
	// Binaries to install from SrcDir (default DefaultBinaries).
	Binaries []string
	// AsWhereabouts: auto, true or false (see Main's --help).
	AsWhereabouts string
	// Force allows a downgrade, and with AsWhereabouts "true" replacing
	// another project's whereabouts.
	Force bool
	// APIServer is the server URL written into the kubeconfigs.
	APIServer string
	// Version is the version of what is installed (version.Get()).
	Version string
	// Installer describes the installer for the manifest (version.String).
	Installer string
	// ReportedVersion asks an installed rdmanet binary its version when no
	// manifest says (an install without a stamp); nil runs `path --version`.
	ReportedVersion func(ctx context.Context, path string) (string, error)
	Log             *slog.Logger
}

// DefaultOptions are the DaemonSet's mount paths.
func DefaultOptions() Options {
	return Options{
		SrcDir:        "/opt/rdmanet/bin",
		CNIBinDir:     "/host/opt/cni/bin",
		CNIConfDir:    "/etc/cni/net.d",
		ConfigDir:     "/etc/rdmanet/node",
		TokenDir:      "/var/run/secrets/rdmanet",
		Binaries:      slices.Clone(DefaultBinaries),
		AsWhereabouts: WhereaboutsAuto,
	}
}

// ErrNewerInstalled is returned (wrapped) when a newer rdmanet is installed
// and Force is not set.
var ErrNewerInstalled = errors.New("a newer rdmanet is installed")

// ErrForeignWhereabouts is returned (wrapped) when AsWhereabouts is "true",
// another project's whereabouts is installed, and Force is not set.
var ErrForeignWhereabouts = errors.New("another whereabouts plugin is installed")

// Action is what happened to one file.
type Action struct {
	Path   string `json:"path"`
	Did    string `json:"did"` // installed, updated, unchanged, removed, left, skipped, gone
	Reason string `json:"reason,omitempty"`
}

// Report is the outcome of Install or Uninstall.
type Report struct {
	Version          string   `json:"version"`
	InstalledVersion string   `json:"installedVersion,omitempty"`
	Whereabouts      string   `json:"whereabouts"` // installed, skipped, not requested, removed
	Actions          []Action `json:"actions"`
	Took             time.Duration
}

// Count returns how many actions did what.
func (r *Report) Count(did string) int {
	n := 0
	for _, a := range r.Actions {
		if a.Did == did {
			n++
		}
	}
	return n
}

func (o *Options) manifestPath() string {
	if o.Manifest != "" {
		return o.Manifest
	}
	return filepath.Join(o.CNIConfDir, MetaDir, ManifestName)
}

func (o *Options) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (o *Options) src() fs.FS {
	if o.Src != nil {
		return o.Src
	}
	return os.DirFS(o.SrcDir)
}

// root returns the directory of a manifest root ("bin" or "conf").
func (o *Options) root(r string) string {
	if r == rootBin {
		return o.CNIBinDir
	}
	return o.CNIConfDir
}

func (o *Options) abs(e Entry) string {
	return filepath.Join(o.root(e.Root), filepath.FromSlash(e.Path))
}

// Install installs rdmanet into the node's CNI directories (see the package doc).
func Install(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	log := o.log()
	if err := o.validate(); err != nil {
		return nil, err
	}
	rep := &Report{Version: o.Version}
	old, err := readManifest(o.manifestPath())
	if err != nil {
		return nil, err
	}
	log.Info("rdmanet-install: installing", "version", o.Version, "src", o.srcName(), "cni_bin_dir", o.CNIBinDir,
		"cni_conf_dir", o.CNIConfDir, "install_as_whereabouts", o.AsWhereabouts, "force", o.Force)

	// 1. never clobber a newer install
	installed, from := o.installedVersion(ctx, old)
	rep.InstalledVersion = installed
	if err := o.checkVersion(installed, from); err != nil {
		return rep, err
	}

	// 2. whereabouts
	plan, err := o.plan()
	if err != nil {
		return rep, err
	}
	wb, err := o.decideWhereabouts(old)
	if err != nil {
		return rep, err
	}
	rep.Whereabouts = wb.what
	if wb.install {
		ipam := plan[slices.IndexFunc(plan, func(p planned) bool { return p.entry.Path == IPAMBinary && p.entry.Root == rootBin })]
		wbp := ipam
		wbp.entry = Entry{Root: rootBin, Path: Whereabouts, Kind: kindBinary, SHA256: ipam.entry.SHA256}
		// before the configs: binaries first, 00-rdmanet.conf last
		i := slices.IndexFunc(plan, func(p planned) bool { return p.entry.Root != rootBin })
		plan = slices.Insert(plan, i, wbp)
	}
	for _, l := range wb.logs {
		l(log)
	}

	// 3. record what is about to be written (with what is there now, so an
	// interrupted run can still be uninstalled), then write.
	next := &Manifest{Version: o.Version, Installer: o.Installer, Time: time.Now().UTC().Format(time.RFC3339)}
	for _, p := range plan {
		next.Files = append(next.Files, p.entry)
	}
	next.Dirs = []string{MetaDir, IPAMDir}
	if err := o.prepareDirs(); err != nil {
		return rep, err
	}
	o.sweepTemps(plan, old)
	if err := writeManifest(o.manifestPath(), pending(old, next)); err != nil {
		return rep, err
	}
	for _, p := range plan {
		a, err := o.put(p)
		if err != nil {
			return rep, err
		}
		rep.Actions = append(rep.Actions, a)
	}

	// 4. what an earlier install put there and this one does not
	if old != nil {
		for _, e := range old.Files {
			if next.has(e) {
				continue
			}
			a := o.remove(e, "no longer installed")
			rep.Actions = append(rep.Actions, a)
		}
	}
	if err := writeManifest(o.manifestPath(), next); err != nil {
		return rep, err
	}
	rep.Took = time.Since(start)
	log.Info("rdmanet-install: done", "version", o.Version, "installed", rep.Count("installed"), "updated", rep.Count("updated"),
		"unchanged", rep.Count("unchanged"), "removed", rep.Count("removed"), "whereabouts", rep.Whereabouts,
		"manifest", o.manifestPath(), "took", rep.Took.Round(time.Millisecond))
	return rep, nil
}

func (o *Options) srcName() string {
	if o.Src != nil && o.SrcDir == "" {
		return "(in-memory)"
	}
	return o.SrcDir
}

// installedVersion: the manifest's version, else (an install without a
// stamp) what the installed rdmanet shim reports. from says where it came from.
func (o *Options) installedVersion(ctx context.Context, m *Manifest) (v, from string) {
	if m != nil {
		return m.Version, o.manifestPath()
	}
	shim := filepath.Join(o.CNIBinDir, "rdmanet")
	b, err := inspect.File(shim)
	if err != nil || !b.Is("rdmanet") {
		return "", ""
	}
	ask := o.ReportedVersion
	if ask == nil {
		ask = reportedVersion
	}
	v, err = ask(ctx, shim)
	if err != nil {
		o.log().Info("installed rdmanet does not report a version (an install from before 0.2.0): treating it as older", "file", shim, "err", err)
		return "", ""
	}
	return v, shim + " --version"
}

// reportedVersion runs `path --version` (rdmanet's own binary: inspect said so).
func reportedVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{"PATH=/nonexistent"}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	_, v, ok := version.Parse(string(out))
	if !ok {
		return "", fmt.Errorf("%s --version printed %q, not a version", path, strings.TrimSpace(string(out)))
	}
	return v, nil
}

func (o *Options) checkVersion(installed, from string) error {
	log := o.log()
	if installed == "" {
		log.Info("no rdmanet install recorded here: fresh install", "manifest", o.manifestPath())
		return nil
	}
	c, ok := version.Compare(installed, o.Version)
	switch {
	case !ok:
		log.Warn("cannot compare the installed version with this one: installing", "installed", installed, "from", from, "version", o.Version)
	case c == 0:
		log.Info("same version installed: reinstalling (identical files are left as they are)", "installed", installed)
	case c < 0:
		log.Info("upgrading", "installed", installed, "version", o.Version)
	case o.Force:
		log.Warn("downgrading a newer install (--force)", "installed", installed, "from", from, "version", o.Version)
	default:
		return fmt.Errorf("%w: %s says rdmanet %s, this installer is %s: refusing to downgrade, nothing changed; fix: run the %s image, or pass --force to downgrade",
			ErrNewerInstalled, from, installed, o.Version, installed)
	}
	return nil
}
