// Command rdmanet-release builds rdmanet's release into a directory
// (internal/release; `make release`, docs/release.md). It lives under hack/,
// not cmd/, because every cmd/ binary goes into the rdmanet image.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rdmanet/rdmanet/internal/release"
)

func main() {
	fs := flag.NewFlagSet("rdmanet-release", flag.ExitOnError)
	var o release.Options
	fs.StringVar(&o.Out, "out", "_output/release", "release directory (emptied first)")
	fs.StringVar(&o.Work, "work", "", "staging directory of the image build (default _output/release-work)")
	fs.StringVar(&o.Dir, "dir", ".", "module root")
	fs.StringVar(&o.CycloneDXGomod, "cyclonedx-gomod", ".tools/bin/cyclonedx-gomod", "cyclonedx-gomod binary (hack/build-release-tools.sh)")
	fs.StringVar(&o.URIBase, "uri-base", "", "download URL prefix of the archives in the krew manifest (default the GitHub release of VERSION)")
	_ = fs.Parse(os.Args[1:])
	o.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	names, err := release.Build(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdmanet-release: %v\n", err)
		os.Exit(1)
	}
	for _, n := range names {
		fmt.Println(o.Out + "/" + n)
	}
}
