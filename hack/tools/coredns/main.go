// Command coredns is upstream CoreDNS, built from the published
// github.com/coredns/coredns module for rdmanet's multi-node cluster tier
// (cluster DNS, so headless-Service names resolve). It compiles in only the
// plugins the cluster's Corefile uses instead of CoreDNS's full default set
// (core/plugin pulls in the cloud DNS providers' SDKs); a Corefile naming any
// other plugin fails at startup with "unknown directive".
// hack/build-k8s-tools.sh builds it into .tools/bin.
package main

import (
	"fmt"
	"os"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins, registered by their init functions.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the execution order of the compiled-in plugins: upstream's
// plugin.cfg order, restricted to the imports above ("prometheus" is the
// metrics plugin's directive).
var directives = []string{
	"reload",
	"bind",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"hosts",
	"kubernetes",
	"loop",
	"forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		fmt.Fprintln(os.Stderr, "coredns:", err)
		os.Exit(2)
	}
	coremain.Run()
}
