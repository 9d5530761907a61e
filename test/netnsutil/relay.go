package netnsutil

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdmanet/rdmanet/internal/netops"
)

// RelayAPIServer makes the API server (listening on 127.0.0.1 of the test's
// own namespace) reachable from the host stand-in namespace, as it is from a
// real node: a TCP listener created inside that namespace on its loopback
// (same address, so the serving certificate still matches) relays every
// connection to the server. No link of the test's namespace is touched.
// It rewrites the kubeconfig's server URL to the relay and returns the
// relay's address. The relay stops at the test's cleanup.
func RelayAPIServer(t testing.TB, host ns.NetNS, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	u, err := url.Parse(cl.Server)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	var lis net.Listener
	Do(t, host, func() error {
		if err := netops.SetLinkUp("lo"); err != nil {
			return err
		}
		var err error
		lis, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	u.Host = lis.Addr().String()
	cl.Server = u.String()
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return u.Host
}
