package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rdmanet/rdmanet/internal/version"
	"github.com/rdmanet/rdmanet/internal/version/inspect"
)

// Repository is the rdmanet image's name. It has no registry host: users
// retag it for their registry (docs/deploy.md).
const Repository = "rdmanet/rdmanet"

// BinDir is where the rdmanet image keeps every binary.
const BinDir = "/opt/rdmanet/bin"

// SimTag is the Go build tag of the simulated-node variant: it compiles in
// the test-only behaviour (the recording fake for VF/RDMA operations,
// RDMANET_NETOPS=record, and the RDMANET_CNI_FAULT failpoints).
const SimTag = "rdmanet_testhooks"

// GoBuild builds static Go binaries (CGO_ENABLED=0, -trimpath, the version
// stamp) of main packages into a directory.
type GoBuild struct {
	// Dir is the module root the packages are built in ("" = current dir).
	Dir string
	// Packages are import paths or patterns of main packages ("./cmd/...").
	Packages []string
	// OutDir receives one binary per package; it is emptied first.
	OutDir string
	// Tags are Go build tags (-tags).
	Tags []string
	// Version is stamped into internal/version (-X); "" stamps nothing.
	Version string
	// GOARCH to build for (default this machine's).
	GOARCH string
	// Go is the go command (default "go").
	Go string
}

// Run builds and returns the binaries' paths, sorted.
func (b GoBuild) Run(ctx context.Context) ([]string, error) {
	goCmd := b.Go
	if goCmd == "" {
		goCmd = "go"
	}
	arch := b.GOARCH
	if arch == "" {
		arch = runtime.GOARCH
	}
	if len(b.Packages) == 0 {
		return nil, fmt.Errorf("go build: no packages")
	}
	if err := os.RemoveAll(b.OutDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.OutDir, 0o755); err != nil {
		return nil, err
	}
	ldflags := "-s -w"
	if b.Version != "" {
		ldflags += " -X " + version.LinkVar + "=" + b.Version
	}
	args := []string{"build", "-trimpath", "-ldflags", ldflags}
	if len(b.Tags) > 0 {
		args = append(args, "-tags", strings.Join(b.Tags, ","))
	}
	args = append(args, "-o", b.OutDir+string(filepath.Separator))
	args = append(args, b.Packages...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", goCmd, strings.Join(args, " "), err, out)
	}
	ents, err := os.ReadDir(b.OutDir)
	if err != nil {
		return nil, err
	}
	var bins []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			bins = append(bins, filepath.Join(b.OutDir, e.Name()))
		}
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("go build %v built nothing (no main packages?)", b.Packages)
	}
	slices.Sort(bins)
	return bins, nil
}

// ReadVersionFile returns the VERSION file of the module root dir.
func ReadVersionFile(dir string) (string, error) {
	p := filepath.Join(dir, "VERSION")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("version: %w (the repository root holds VERSION)", err)
	}
	v := strings.TrimSpace(string(b))
	if !version.Valid(v) {
		return "", fmt.Errorf("%s: %q is not a semantic version (e.g. 0.2.0)", p, v)
	}
	return strings.TrimPrefix(v, "v"), nil
}

// RdmanetOptions selects the rdmanet image to build.
type RdmanetOptions struct {
	// Dir is the module root (default: current directory).
	Dir string
	// Version defaults to the VERSION file.
	Version string
	// Sim builds the simulated-node variant (-tags rdmanet_testhooks,
	// tag <version>-sim).
	Sim bool
	// OutDir gets rdmanet-<tag>.tar and the staging dir (default
	// <Dir>/_output/image).
	OutDir string
	// Packages default to every command: ./cmd/...
	Packages []string
	// GOARCH to build for (default this machine's).
	GOARCH string
	// Created: see Spec.Created.
	Created time.Time
}

// Rdmanet builds every rdmanet binary statically and assembles the image
// rdmanet/rdmanet:<version> (or <version>-sim) for one architecture
// (o.GOARCH): the binaries in /opt/rdmanet/bin, nothing else — no shell, no
// libc, every entry owned by root and writable by root only. The archive is
// docker-save style (rdmanet-<tag>.tar).
func Rdmanet(ctx context.Context, o RdmanetOptions) (Result, error) {
	if err := o.fill(); err != nil {
		return Result{}, err
	}
	spec, err := rdmanetSpec(ctx, &o, o.GOARCH, "rdmanet-"+rdmanetTag(o))
	if err != nil {
		return Result{}, err
	}
	spec.Output = filepath.Join(o.OutDir, "rdmanet-"+rdmanetTag(o)+".tar")
	return Build(spec)
}

// Arches are the architectures of the multi-platform rdmanet image and of
// the released binaries.
var Arches = []string{"amd64", "arm64"}

// RdmanetIndex builds the rdmanet image for every architecture in arches
// (default Arches) and writes one OCI image index over them as an OCI
// image layout archive, rdmanet-<tag>.oci.tar (BuildIndex). Each
// architecture's static binaries stay in <OutDir>/stage/rdmanet-<tag>-linux-<arch>/.
func RdmanetIndex(ctx context.Context, o RdmanetOptions, arches []string) (IndexResult, error) {
	if err := o.fill(); err != nil {
		return IndexResult{}, err
	}
	if len(arches) == 0 {
		arches = Arches
	}
	is := IndexSpec{Created: o.Created}
	for _, arch := range arches {
		spec, err := rdmanetSpec(ctx, &o, arch, "rdmanet-"+rdmanetTag(o)+"-linux-"+arch)
		if err != nil {
			return IndexResult{}, err
		}
		is.Ref = spec.Ref
		if is.Annotations == nil {
			is.Annotations = map[string]string{}
			for _, k := range []string{"org.opencontainers.image.title", "org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.description"} {
				if v := spec.Labels[k]; v != "" {
					is.Annotations[k] = v
				}
			}
		}
		is.Images = append(is.Images, spec)
	}
	is.Output = filepath.Join(o.OutDir, "rdmanet-"+rdmanetTag(o)+".oci.tar")
	return BuildIndex(is)
}

// StageDir is where RdmanetIndex leaves an architecture's binaries.
func StageDir(outDir, tag, arch string) string {
	return filepath.Join(outDir, "stage", "rdmanet-"+tag+"-linux-"+arch)
}

func rdmanetTag(o RdmanetOptions) string {
	if o.Sim {
		return o.Version + "-sim"
	}
	return o.Version
}

// fill sets the defaults of Dir, Version, OutDir and Packages.
func (o *RdmanetOptions) fill() error {
	if o.Dir == "" {
		o.Dir = "."
	}
	if o.Version == "" {
		v, err := ReadVersionFile(o.Dir)
		if err != nil {
			return err
		}
		o.Version = v
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.Dir, "_output", "image")
	}
	if len(o.Packages) == 0 {
		o.Packages = []string{"./cmd/..."}
	}
	return nil
}

// rdmanetSpec fills o's defaults (Dir, Version, OutDir, Packages), builds
// the binaries for arch into <OutDir>/stage/<stage> and returns the
// image's spec (no Output).
func rdmanetSpec(ctx context.Context, o *RdmanetOptions, arch, stage string) (Spec, error) {
	if err := o.fill(); err != nil {
		return Spec{}, err
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	v := o.Version
	variant, tag := "production", rdmanetTag(*o)
	var tags []string
	if o.Sim {
		variant, tags = "sim", []string{SimTag}
	}
	bins, err := GoBuild{Dir: o.Dir, Packages: o.Packages, OutDir: filepath.Join(o.OutDir, "stage", stage), Tags: tags, Version: v, GOARCH: arch}.Run(ctx)
	if err != nil {
		return Spec{}, err
	}
	// The tag is the version the binaries report.
	rev := ""
	for _, b := range bins {
		got, err := reportedVersion(ctx, b, arch)
		if err != nil {
			return Spec{}, err
		}
		if got != "" && got != v {
			return Spec{}, fmt.Errorf("%s reports version %s, want %s (VERSION)", b, got, v)
		}
		if bi, err := inspect.File(b); err == nil && rev == "" {
			rev = bi.Revision
		}
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   "rdmanet",
		"org.opencontainers.image.version": v,
		"io.rdmanet.variant":               variant,
	}
	if o.Sim {
		labels["org.opencontainers.image.description"] = "rdmanet simulated-node build (Go build tag " + SimTag + ": recording fake for VF/RDMA operations, CNI failpoints); for tests, never for production"
		labels["io.rdmanet.build-tags"] = SimTag
	} else {
		labels["org.opencontainers.image.description"] = "rdmanet: RDMA networking for Kubernetes GPU training pods (agent, meta CNI and daemon, sriov, rdma, rdmanet-ipam, installer, kubectl-rdma)"
	}
	if rev != "" {
		labels["org.opencontainers.image.revision"] = rev
	}
	spec := Spec{
		Ref:           Repository + ":" + tag,
		Env:           []string{"PATH=" + BinDir},
		Cmd:           []string{BinDir + "/rdmanet-agent", "--version"},
		Labels:        labels,
		Created:       o.Created,
		Arch:          arch,
		RequireStatic: true,
	}
	for _, b := range bins {
		spec.Files = append(spec.Files, File{Path: BinDir + "/" + filepath.Base(b), Source: b, Mode: 0o755})
	}
	return spec, nil
}

// reportedVersion runs `bin --version` where this machine can run it
// (same GOARCH); "" when it cannot.
func reportedVersion(ctx context.Context, bin, arch string) (string, error) {
	if arch != runtime.GOARCH {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=/nonexistent"}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w (every rdmanet binary answers --version: internal/version)", bin, err)
	}
	_, v, ok := version.Parse(string(out))
	if !ok {
		return "", fmt.Errorf("%s --version printed %q, not an rdmanet version line", bin, strings.TrimSpace(string(out)))
	}
	return v, nil
}

// PauseRef and TestboxRef are the local images of the real-node test
// harness (never pulled: built here and imported into containerd).
const (
	PauseRef   = "localhost/pause:rdmanet"
	TestboxRef = "localhost/testbox:latest"
)

// PausePackage is the pause program's import path.
const PausePackage = version.Module + "/test/images/pause"

// PauseOptions: see Pause.
type PauseOptions struct {
	// Dir is the module root (default: current directory).
	Dir string
	// OutDir gets pause-rdmanet.tar (default <Dir>/_output/image).
	OutDir  string
	GOARCH  string
	Created time.Time
}

// Pause builds the pod sandbox image localhost/pause:rdmanet: one static Go
// binary /pause (test/images/pause: sleeps until SIGTERM or SIGINT, reaps
// zombies), run as 65535:65535 like the upstream pause image.
func Pause(ctx context.Context, o PauseOptions) (Result, error) {
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	out := o.OutDir
	if out == "" {
		out = filepath.Join(dir, "_output", "image")
	}
	bins, err := GoBuild{Dir: dir, Packages: []string{PausePackage}, OutDir: filepath.Join(out, "stage", "pause"), GOARCH: o.GOARCH}.Run(ctx)
	if err != nil {
		return Result{}, err
	}
	return Build(Spec{
		Ref:           PauseRef,
		Files:         []File{{Path: "/pause", Source: bins[0], Mode: 0o755}},
		Entrypoint:    []string{"/pause"},
		User:          "65535:65535",
		Labels:        map[string]string{"org.opencontainers.image.title": "pause (rdmanet test harness)"},
		Created:       o.Created,
		Arch:          o.GOARCH,
		Output:        filepath.Join(out, "pause-rdmanet.tar"),
		RequireStatic: true,
	})
}

// BusyboxApplets are the commands the test image links to busybox.
var BusyboxApplets = []string{
	"[", "awk", "cat", "chmod", "cp", "cut", "date", "df", "dmesg", "echo", "env", "false", "find", "grep", "head",
	"hostname", "id", "ifconfig", "ip", "kill", "ln", "ls", "mkdir", "mount", "mv", "nc", "nslookup", "ping", "printf",
	"ps", "pwd", "readlink", "rm", "route", "sed", "seq", "sh", "sleep", "sort", "stat", "tail", "tee", "test", "timeout",
	"touch", "tr", "true", "uname", "uniq", "wc", "wget", "xargs",
}

// RendezvousPackage is the testbox image's two-rank rendezvous and
// transfer program (/bin/rdmanet-rendezvous): what NCCL's bootstrap does,
// in miniature, for the cluster tier's cross-node scenarios.
const RendezvousPackage = version.Module + "/test/images/rendezvous"

// TestboxOptions: see Testbox.
type TestboxOptions struct {
	// Busybox is a static busybox binary (default /bin/busybox, Debian's
	// busybox-static).
	Busybox string
	// OutDir gets testbox-latest.tar (default _output/image).
	OutDir  string
	Arch    string
	Created time.Time
	// Dir is the module root the test programs are built in ("" = current dir).
	Dir string
}

// Testbox builds the workload test image localhost/testbox:latest: Debian's
// static busybox at /bin/busybox with BusyboxApplets linked to it (sh, ip,
// ls, cat, sleep, …) and the test program RendezvousPackage at
// /bin/rdmanet-rendezvous; no entrypoint, cmd ["sleep", "infinity"].
func Testbox(ctx context.Context, o TestboxOptions) (Result, error) {
	bb := o.Busybox
	if bb == "" {
		bb = "/bin/busybox"
	}
	if _, err := os.Stat(bb); err != nil {
		return Result{}, fmt.Errorf("testbox: %w; fix: apt-get install -y busybox-static (Debian), or give the path of a static busybox", err)
	}
	out := o.OutDir
	if out == "" {
		out = filepath.Join("_output", "image")
	}
	bins, err := GoBuild{Dir: o.Dir, Packages: []string{RendezvousPackage}, OutDir: filepath.Join(out, "stage", "testbox"), GOARCH: o.Arch}.Run(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("testbox: %w", err)
	}
	files := []File{{Path: "/bin/busybox", Source: bb, Mode: 0o755}, {Path: "/bin/rdmanet-rendezvous", Source: bins[0], Mode: 0o755}}
	for _, a := range BusyboxApplets {
		files = append(files, File{Path: "/bin/" + a, Link: "busybox"})
	}
	return Build(Spec{
		Ref:           TestboxRef,
		Files:         files,
		Dirs:          []Dir{{Path: "/tmp", Mode: 0o777 | os.ModeSticky}, {Path: "/etc", Mode: 0o755}},
		Env:           []string{"PATH=/bin"},
		Cmd:           []string{"sleep", "infinity"},
		Labels:        map[string]string{"org.opencontainers.image.title": "testbox (rdmanet test harness: busybox-static, rdmanet-rendezvous)"},
		Created:       o.Created,
		Arch:          o.Arch,
		Output:        filepath.Join(out, "testbox-latest.tar"),
		RequireStatic: true,
	})
}
