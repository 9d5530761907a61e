package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmanet/rdmanet/internal/chart"
	"github.com/rdmanet/rdmanet/internal/image"
)

// Options of a release build.
type Options struct {
	// Dir is the module root (default ".").
	Dir string
	// Out receives the release files; it is emptied first.
	Out string
	// Work holds the image build's staging (default <Dir>/_output/release-work).
	Work string
	// Version defaults to the VERSION file.
	Version string
	// Created stamps every archive entry and the image (zero: $SOURCE_DATE_EPOCH, else 0).
	Created time.Time
	// CycloneDXGomod is the cyclonedx-gomod binary (hack/build-release-tools.sh).
	CycloneDXGomod string
	// URIBase is where the krew manifest says the archives are downloaded
	// from (default the GitHub release of the version).
	URIBase string
	// Packages are the commands to build (default ./cmd/...; tests use fewer).
	Packages []string
	// Arches default to image.Arches.
	Arches []string
	// Log gets one line per step (nil: discarded).
	Log io.Writer
}

// Build writes the release into o.Out and returns the files' names:
//
//	rdmanet-<v>-linux-<arch>.tar.gz         every binary of the architecture, in rdmanet-<v>-linux-<arch>/
//	kubectl-rdma-<v>-linux-<arch>.tar.gz    kubectl-rdma alone: the krew plugin archive
//	kubectl-rdma.krew.yaml                  the krew plugin manifest (both architectures, sha256 of each archive)
//	rdmanet-image-<v>.oci.tar               the image index (linux/amd64 + linux/arm64) as an OCI image layout
//	rdmanet-image-<v>-linux-<arch>.cdx.json the CycloneDX SBOM of each platform's image
//	rdmanet-<v>.tgz                         the Helm chart
//	SHA256SUMS                              sha256sum -c SHA256SUMS checks all of the above
func Build(ctx context.Context, o Options) ([]string, error) {
	if o.Dir == "" {
		o.Dir = "."
	}
	if o.Version == "" {
		v, err := image.ReadVersionFile(o.Dir)
		if err != nil {
			return nil, err
		}
		o.Version = v
	}
	if o.Work == "" {
		o.Work = filepath.Join(o.Dir, "_output", "release-work")
	}
	if len(o.Arches) == 0 {
		o.Arches = image.Arches
	}
	if o.URIBase == "" {
		o.URIBase = "https://github.com/rdmanet/rdmanet/releases/download/v" + o.Version + "/"
	}
	if o.Created.IsZero() {
		c, err := image.Epoch()
		if err != nil {
			return nil, err
		}
		o.Created = c
	}
	if o.CycloneDXGomod == "" {
		return nil, fmt.Errorf("release: no cyclonedx-gomod binary (hack/build-release-tools.sh builds .tools/bin/cyclonedx-gomod)")
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", a...)
		}
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	v := o.Version
	imgOut := filepath.Join(o.Work, "image")
	idx, err := image.RdmanetIndex(ctx, image.RdmanetOptions{Dir: o.Dir, Version: v, OutDir: imgOut, Packages: o.Packages, Created: o.Created}, o.Arches)
	if err != nil {
		return nil, err
	}
	logf("%s", idx)
	imgName := "rdmanet-image-" + v + ".oci.tar"
	if err := copyFile(idx.Path, filepath.Join(o.Out, imgName)); err != nil {
		return nil, err
	}
	var krew []KrewArchive
	for _, arch := range o.Arches {
		stage := image.StageDir(imgOut, v, arch)
		ents, err := os.ReadDir(stage)
		if err != nil {
			return nil, err
		}
		var files []File
		var kubectlRdma string
		for _, e := range ents {
			files = append(files, File{Name: e.Name(), Source: filepath.Join(stage, e.Name()), Mode: 0o755})
			if e.Name() == "kubectl-rdma" {
				kubectlRdma = filepath.Join(stage, e.Name())
			}
		}
		base := fmt.Sprintf("rdmanet-%s-linux-%s", v, arch)
		if err := TarGz(filepath.Join(o.Out, base+".tar.gz"), base, files, o.Created); err != nil {
			return nil, err
		}
		if kubectlRdma != "" {
			name := fmt.Sprintf("kubectl-rdma-%s-linux-%s.tar.gz", v, arch)
			p := filepath.Join(o.Out, name)
			if err := TarGz(p, "", []File{{Name: "kubectl-rdma", Source: kubectlRdma, Mode: 0o755}}, o.Created); err != nil {
				return nil, err
			}
			sum, err := SHA256File(p)
			if err != nil {
				return nil, err
			}
			krew = append(krew, KrewArchive{Arch: arch, URI: o.URIBase + name, SHA256: sum})
		}
		sbom := filepath.Join(o.Out, fmt.Sprintf("rdmanet-image-%s-linux-%s.cdx.json", v, arch))
		if err := SBOM(ctx, o.CycloneDXGomod, o.Dir, arch, sbom); err != nil {
			return nil, err
		}
		logf("%s: binaries, SBOM", arch)
	}
	if len(krew) > 0 {
		m, err := KrewManifest(v, krew)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(o.Out, "kubectl-rdma.krew.yaml"), m, 0o644); err != nil {
			return nil, err
		}
	}
	if _, err := chart.Package(filepath.Join(o.Dir, "charts", "rdmanet"), o.Out, o.Created); err != nil {
		return nil, err
	}
	if err := WriteSHA256Sums(o.Out); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(o.Out)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

// SBOM writes the CycloneDX SBOM (JSON) of the rdmanet module as built for
// linux/arch: `cyclonedx-gomod mod` (the modules its packages use, with
// their hashes from go.sum), without serial number and timestamp so that
// the same tree gives the same bytes.
func SBOM(ctx context.Context, tool, dir, arch, out string) error {
	cmd := exec.CommandContext(ctx, tool, "mod", "-json", "-licenses=false", "-noserial", "-notimestamp", "-type", "application", "-output", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
