// Command forward measures what a thin rdmanet CNI binary costs per call
// (make bench-forward): each of sriov, rdma and rdmanet-ipam is exec'd as a
// runtime execs it (CNI_* environment, config on stdin, from a Go process)
// for a CHECK that the work answers at once (the config names no device or
// store, so the answer is an error): through a real rdmanet-daemon's plugin
// socket (path=daemon: start, request, the daemon's quick answer, exit),
// and without a daemon (path=no-daemon: the thin binary execs its -direct
// binary, which answers). /bin/true is the floor of an exec here. It prints
// one forward-bench line per binary and path, with the binary's size.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/rdmanet/rdmanet/test/plugindaemon"
)

func main() {
	bin := flag.String("bin", "", "directory with sriov, rdma, rdmanet-ipam, their -direct binaries and rdmanet-daemon of one VCS-stamped build (required)")
	runs := flag.Int("runs", 300, "calls per binary and path")
	flag.Parse()
	if err := run(*bin, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "forward-bench:", err)
		os.Exit(1)
	}
}

var plugins = []string{"sriov", "rdma", "rdmanet-ipam"}

func run(bin string, runs int) error {
	if bin == "" {
		return errors.New("-bin is required")
	}
	tmp, err := os.MkdirTemp("", "forward-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	d, err := plugindaemon.Start(bin, filepath.Join(tmp, "plugins.sock"), filepath.Join(tmp, "daemon.log"), nil)
	if err != nil {
		return err
	}
	defer d.Stop(os.Interrupt)

	floor, err := measure("/bin/true", nil, nil, runs)
	if err != nil {
		return err
	}
	fmt.Printf("forward-bench: exec=/bin/true runs=%d p50_ms=%.2f p90_ms=%.2f (the floor of an exec here)\n", runs, ms(pct(floor, 50)), ms(pct(floor, 90)))
	for _, p := range plugins {
		fi, err := os.Stat(filepath.Join(bin, p))
		if err != nil {
			return err
		}
		for _, path := range []string{"daemon", "no-daemon"} {
			sock := d.Socket
			if path == "no-daemon" {
				sock = "off"
			}
			env := append(os.Environ(), "CNI_COMMAND=CHECK", "CNI_CONTAINERID=forward-bench", "CNI_NETNS=/proc/self/ns/net",
				"CNI_IFNAME=net1", "CNI_PATH="+bin, "RDMANET_PLUGIN_SOCKET="+sock, "RDMANET_CNI_STATE_DIR="+filepath.Join(tmp, "state"))
			conf := []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"forward-bench","type":%q}`, p))
			before := served(d.Log(), p)
			lat, err := measure(filepath.Join(bin, p), env, conf, runs)
			if err != nil {
				return fmt.Errorf("%s %s: %w", p, path, err)
			}
			got := served(d.Log(), p) - before
			if path == "daemon" && got != runs {
				return fmt.Errorf("%s: the daemon served %d of %d calls (declined or not forwarded?); log:\n%s", p, got, runs, d.Log())
			}
			if path == "no-daemon" && got != 0 {
				return fmt.Errorf("%s without a daemon: the daemon served %d calls", p, got)
			}
			fmt.Printf("forward-bench: plugin=%s path=%s runs=%d p50_ms=%.2f p90_ms=%.2f size_mb=%.1f\n",
				p, path, runs, ms(pct(lat, 50)), ms(pct(lat, 90)), float64(fi.Size())/1e6)
		}
	}
	return nil
}

// served counts the daemon's records of calls of plugin it ran.
func served(log, plugin string) int {
	n := 0
	for _, c := range plugindaemon.Served(log) {
		if c.Plugin == plugin {
			n++
		}
	}
	return n
}

// measure execs bin runs times with env and stdin and returns each wall
// time from start to exit. A CHECK answered with a CNI error exits 1, which
// is expected here; any other failure to run is an error.
func measure(bin string, env []string, stdin []byte, runs int) ([]time.Duration, error) {
	var out []time.Duration
	for range runs {
		c := exec.Command(bin)
		c.Env = env
		c.Stdin = bytes.NewReader(stdin)
		var stdout bytes.Buffer
		c.Stdout = &stdout
		start := time.Now()
		err := c.Run()
		out = append(out, time.Since(start))
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return nil, err
		}
		if env != nil && !bytes.Contains(stdout.Bytes(), []byte(`"code"`)) {
			return nil, fmt.Errorf("no CNI answer on stdout: %q", stdout.String())
		}
	}
	return out, nil
}

func pct(s []time.Duration, p float64) time.Duration {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[min(len(s)-1, int(p/100*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
