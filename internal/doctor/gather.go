package doctor

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdmanet/rdmanet/internal/install"
	"github.com/rdmanet/rdmanet/internal/inventory"
)

// GatherOptions say where the live system is. Every host path is a
// parameter so doctor runs on fixtures.
type GatherOptions struct {
	SysfsRoot string // default /sys
	ProcRoot  string // default /proc
	DevRoot   string // default /dev (its infiniband/ directory is checked)
	// PID whose limits, capabilities and routing table are read
	// (<proc>/<pid>/{limits,status,net/route}); default "self".
	PID string
	// NetnsMode asks the kernel for the RDMA netns mode (netops.Netlink{}.NetnsMode);
	// nil means it cannot be asked.
	NetnsMode     func() (string, error)
	NetnsModeFlag string
	// Env is the environment checked (NCCL_* keys are kept) and EnvSource a
	// description of it ("process", a file name, "--env").
	Env         map[string]string
	EnvSource   string
	TrainingIfs []string
	// CNIBinDir is the node's CNI bin directory, whose whereabouts binary is
	// checked; "" skips the check.
	CNIBinDir string
	// PKeys are the InfiniBand partitions the pod's networks use (Input.PKeys).
	PKeys []uint16
}

// Gather reads the system into an Input. It fails only when the sysfs root
// cannot be read at all; everything else missing becomes a check result.
func Gather(o GatherOptions) (*Input, error) {
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	if o.PID == "" {
		o.PID = "self"
	}
	if st, err := os.Stat(o.SysfsRoot); err != nil {
		return nil, fmt.Errorf("sysfs root: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("sysfs root %s is not a directory", o.SysfsRoot)
	}
	in := &Input{
		PKeys:         o.PKeys,
		SysfsRoot:     o.SysfsRoot,
		DevRoot:       o.DevRoot,
		NetnsModeFlag: o.NetnsModeFlag,
		TrainingIfs:   o.TrainingIfs,
		Env:           FilterNCCL(o.Env),
		EnvSource:     o.EnvSource,
	}
	if o.NetnsMode != nil {
		in.NetnsMode, in.NetnsModeErr = o.NetnsMode()
		if in.NetnsModeErr != nil {
			in.NetnsMode = ""
		}
	} else {
		in.NetnsModeErr = fmt.Errorf("RDMA netlink not queried")
	}
	pidDir := filepath.Join(o.ProcRoot, o.PID)
	in.DefaultRouteLinks, in.RouteErr = inventory.DefaultRouteLinks(pidDir)
	node, err := inventory.Discover(inventory.Options{
		SysfsRoot:         o.SysfsRoot,
		DefaultRouteLinks: in.DefaultRouteLinks,
		NetnsMode:         in.NetnsMode,
		NetnsModeFlag:     o.NetnsModeFlag,
		NetnsModeErr:      in.NetnsModeErr,
	})
	if err != nil {
		return nil, err
	}
	in.Node = node
	in.Netdevs = readNetdevs(o.SysfsRoot)
	in.DevNodes, in.DevListErr = readDevNodes(o.DevRoot)
	in.Memlock = readMemlock(o.ProcRoot, o.PID)
	in.Caps = readCaps(o.ProcRoot, o.PID)
	if o.CNIBinDir != "" {
		in.CNIBinDir = o.CNIBinDir
		in.WhereaboutsOwner, in.WhereaboutsErr = install.WhereaboutsOwner(o.CNIBinDir)
		in.MissingFallbacks, in.FallbacksErr = install.MissingFallbacks(o.CNIBinDir)
	}
	return in, nil
}

func readNetdevs(sysfs string) map[string]string {
	dir := filepath.Join(sysfs, "class/net")
	ents, err := os.ReadDir(dir)
	out := map[string]string{}
	if err != nil {
		return out
	}
	for _, e := range ents {
		st, err := os.ReadFile(filepath.Join(dir, e.Name(), "operstate"))
		if err != nil {
			out[e.Name()] = "unknown"
			continue
		}
		out[e.Name()] = strings.TrimSpace(string(st))
	}
	return out
}

func readDevNodes(devRoot string) (map[string]bool, error) {
	out := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(devRoot, "infiniband"))
	if err != nil {
		return out, err
	}
	for _, e := range ents {
		out["/dev/infiniband/"+e.Name()] = true
	}
	return out, nil
}

func readMemlock(procRoot, pid string) Memlock {
	p := filepath.Join(procRoot, pid, "limits")
	b, err := os.ReadFile(p)
	if err == nil {
		m, perr := ParseLimits(b)
		m.Source = p
		if perr != nil {
			m.Err = perr.Error()
		}
		return m
	}
	if procRoot == "/proc" && pid == "self" {
		var rl unix.Rlimit
		if gerr := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); gerr == nil {
			return Memlock{Known: true, Unlimited: rl.Cur == unix.RLIM_INFINITY, Soft: rl.Cur, Hard: rl.Max, Source: "getrlimit"}
		}
	}
	return Memlock{Source: p, Err: err.Error()}
}

// ParseLimits reads "Max locked memory" from a /proc/<pid>/limits file.
func ParseLimits(b []byte) (Memlock, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Max locked memory") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "Max locked memory"))
		if len(f) < 2 {
			return Memlock{}, fmt.Errorf("limits: malformed line %q", line)
		}
		var m Memlock
		var err error
		if m.Soft, m.Unlimited, err = limitVal(f[0]); err != nil {
			return Memlock{}, err
		}
		var hu bool
		if m.Hard, hu, err = limitVal(f[1]); err != nil {
			return Memlock{}, err
		}
		_ = hu
		m.Known = true
		return m, nil
	}
	return Memlock{}, fmt.Errorf("limits: no \"Max locked memory\" line")
}

func limitVal(s string) (uint64, bool, error) {
	if s == "unlimited" {
		return 0, true, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("limits: Max locked memory %q: %w", s, err)
	}
	return v, false, nil
}

func readCaps(procRoot, pid string) Caps {
	p := filepath.Join(procRoot, pid, "status")
	b, err := os.ReadFile(p)
	if err != nil {
		return Caps{Source: p, Err: err.Error()}
	}
	c, err := ParseCapEff(b)
	c.Source = p
	if err != nil {
		c.Err = err.Error()
	}
	return c
}

// ParseCapEff reads CapEff from a /proc/<pid>/status file.
func ParseCapEff(b []byte) (Caps, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "CapEff" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return Caps{}, fmt.Errorf("status: CapEff %q: %w", strings.TrimSpace(v), err)
		}
		return Caps{Known: true, CapEff: n}, nil
	}
	return Caps{}, fmt.Errorf("status: no CapEff line")
}

// FilterNCCL keeps the NCCL_* variables.
func FilterNCCL(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "NCCL_") {
			out[k] = v
		}
	}
	return out
}

// EnvFromList turns KEY=VALUE strings (os.Environ) into a map.
func EnvFromList(kv []string) map[string]string {
	out := map[string]string{}
	for _, s := range kv {
		if k, v, ok := strings.Cut(s, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// ParseEnvFile reads an environment: KEY=VALUE lines (`export ` prefix,
// blank lines, # comments and surrounding quotes allowed: `env` output or
// a shell snippet), or a NUL-separated /proc/<pid>/environ.
func ParseEnvFile(r io.Reader) (map[string]string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(b, 0) >= 0 {
		var kv []string
		for _, s := range bytes.Split(b, []byte{0}) {
			if len(s) > 0 {
				kv = append(kv, string(s))
			}
		}
		return EnvFromList(kv), nil
	}
	out := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", i+1, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out, nil
}
