// Command rdmanet-image builds the project's OCI image archives without a
// container daemon (internal/image), one summary line per image:
//
//	go run ./hack/rdmanet-image rdmanet        # make image      → _output/image/rdmanet-<version>.oci.tar (linux/amd64 + linux/arm64 index)
//	go run ./hack/rdmanet-image sim            # make image-sim  → _output/image/rdmanet-<version>-sim.tar
//	go run ./hack/rdmanet-image pause          # make image-pause   → _output/image/pause-rdmanet.tar
//	go run ./hack/rdmanet-image testbox        # make image-testbox → _output/image/testbox-latest.tar
//
// It lives under hack/, not cmd/, because every cmd/ binary goes into the
// rdmanet image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rdmanet/rdmanet/internal/image"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("rdmanet-image", flag.ContinueOnError)
	out := fs.String("out", "_output/image", "directory for the archives (and stage/, the staged binaries)")
	dir := fs.String("dir", ".", "module root")
	ver := fs.String("version", "", "version to stamp and tag (default: the VERSION file)")
	busybox := fs.String("busybox", "/bin/busybox", "static busybox for the testbox image (Debian: apt-get install -y busybox-static)")
	goarch := fs.String("goarch", "", "GOARCH of the single-architecture images sim, pause, testbox (default this machine's)")
	arches := fs.String("arches", strings.Join(image.Arches, ","), "architectures of the rdmanet image index (comma-separated GOARCH values)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: rdmanet-image [flags] rdmanet|sim|pause|testbox...\n\nrdmanet: one OCI image index (--arches) as an OCI image layout archive (ctr images import --all-platforms, docker load, skopeo copy --all oci-archive:...).\nsim, pause, testbox: docker-save style archives of one architecture (ctr images import, docker load).\nSOURCE_DATE_EPOCH sets the timestamps (default 0).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, what := range fs.Args() {
		var r image.Result
		var err error
		switch what {
		case "rdmanet":
			ir, err := image.RdmanetIndex(ctx, image.RdmanetOptions{Dir: *dir, Version: *ver, OutDir: *out}, strings.Split(*arches, ","))
			if err != nil {
				fmt.Fprintf(os.Stderr, "rdmanet-image: %s: %v\n", what, err)
				return 1
			}
			fmt.Println(ir)
			continue
		case "sim":
			r, err = image.Rdmanet(ctx, image.RdmanetOptions{Dir: *dir, Version: *ver, Sim: true, OutDir: *out, GOARCH: *goarch})
		case "pause":
			r, err = image.Pause(ctx, image.PauseOptions{Dir: *dir, OutDir: *out, GOARCH: *goarch})
		case "testbox":
			r, err = image.Testbox(ctx, image.TestboxOptions{Busybox: *busybox, OutDir: *out, Arch: *goarch, Dir: *dir})
		default:
			fmt.Fprintf(os.Stderr, "rdmanet-image: unknown image %q: want rdmanet, sim, pause or testbox\n", what)
			return 2
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rdmanet-image: %s: %v\n", what, err)
			return 1
		}
		fmt.Println(r)
	}
	return 0
}
