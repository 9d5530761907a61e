package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Machine is what cluster-down must leave as cluster-up found it: the
// machine's own links, network namespaces and mounts, and no process or
// cgroup of the node.
type Machine struct {
	Links   []string `json:"links"`
	Netns   []string `json:"netns"`
	Mounts  []string `json:"mounts"`
	Created []string `json:"created"` // directories cluster-up created on the machine (mount targets)
}

// ReadMachine reads the machine's current state (from the caller's
// namespaces: run it from the machine's shell).
func ReadMachine() (Machine, error) {
	var m Machine
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return m, fmt.Errorf("ip link: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			m.Links = append(m.Links, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			m.Netns = append(m.Netns, e.Name())
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return m, fmt.Errorf("mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 {
			m.Mounts = append(m.Mounts, fs[4])
		}
	}
	sort.Strings(m.Links)
	sort.Strings(m.Netns)
	sort.Strings(m.Mounts)
	return m, nil
}

func (l Layout) saveSnapshot(m Machine) error {
	b, _ := json.MarshalIndent(m, "", "  ")
	return os.WriteFile(l.Snapshot(), b, 0o644)
}

func (l Layout) loadSnapshot() (Machine, error) {
	var m Machine
	b, err := os.ReadFile(l.Snapshot())
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// Diff lists what differs between before and now, and what of the node is
// still there (processes of the tools or state dirs, cgroups under
// CgroupRoot). Empty means the machine is as it was.
func (l Layout) Diff(before, now Machine) []string {
	var d []string
	d = append(d, setDiff("link", before.Links, now.Links)...)
	d = append(d, setDiff("netns", before.Netns, now.Netns)...)
	d = append(d, setDiff("mount", before.Mounts, now.Mounts)...)
	for _, p := range before.Created {
		if fileExists(p) {
			d = append(d, "directory still there: "+p)
		}
	}
	for _, p := range l.leftoverProcesses() {
		d = append(d, "process still running: "+p)
	}
	for _, c := range leftoverCgroups() {
		d = append(d, "cgroup still there: "+c)
	}
	return d
}

func setDiff(what string, before, now []string) []string {
	var d []string
	for _, x := range now {
		if !slices.Contains(before, x) {
			d = append(d, fmt.Sprintf("%s added: %s", what, x))
		}
	}
	for _, x := range before {
		if !slices.Contains(now, x) {
			d = append(d, fmt.Sprintf("%s removed: %s", what, x))
		}
	}
	return d
}

// leftoverProcesses are processes running a binary of the tools or state
// dir, or in a namespace of the node (supervisor included).
func (l Layout) leftoverProcesses() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid := e.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' || pid == fmt.Sprint(os.Getpid()) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", pid, "exe"))
		if err != nil || isZombie(atoi(pid)) {
			continue
		}
		if strings.HasPrefix(exe, l.Tools()+"/") || strings.HasPrefix(exe, l.Dir+"/") {
			out = append(out, fmt.Sprintf("pid %s %s", pid, exe))
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if strings.Contains(string(cmdline), "rdmanet-cluster\x00supervise") {
			out = append(out, fmt.Sprintf("pid %s supervisor", pid))
		}
	}
	return out
}

func leftoverCgroups() []string {
	var out []string
	ms, _ := filepath.Glob("/sys/fs/cgroup/*" + CgroupRoot)
	for _, m := range ms {
		out = append(out, m)
	}
	return out
}

// removeCgroups removes the CgroupRoot subtree in every hierarchy, deepest
// first (rmdir of an empty cgroup; a cgroup with processes stays and is
// reported by Diff).
func removeCgroups() {
	for _, root := range leftoverCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// NodeProcesses lists "pid exe" of every process in the first node's
// network namespace (the node's own processes and its hostNetwork pods).
func NodeProcesses() []string { return NodeProcessesOf(NodeNetns) }

// NodeProcessesOf lists "pid exe" of every process in network namespace
// netns (a node's).
func NodeProcessesOf(netns string) []string {
	f, err := os.Open("/run/netns/" + netns)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	for _, pid := range processesInNetns(f) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		out = append(out, fmt.Sprintf("%d %s", pid, exe))
	}
	return out
}

// createCgroups creates CgroupRoot and each node's cgroup root below it in
// every cgroup hierarchy: kubelet refuses a --cgroup-root that does not
// exist, and two kubelets must not share one.
func createCgroups(nodes []Node) error {
	ms, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, m := range ms {
		if st, err := os.Stat(filepath.Join(m, "cgroup.procs")); err != nil || st.IsDir() {
			continue // not a hierarchy root
		}
		dirs := []string{CgroupRoot}
		for _, n := range nodes {
			dirs = append(dirs, n.CgroupRoot())
		}
		for _, d := range dirs {
			if err := os.MkdirAll(m+d, 0o755); err != nil {
				return fmt.Errorf("create cgroup %s: %w", m+d, err)
			}
			// A new cpuset cgroup starts with no CPUs and no memory
			// nodes: inherit the root's, or nothing can join it.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(m, f)); err == nil {
					if err := os.WriteFile(filepath.Join(m+d, f), v, 0o644); err != nil {
						return fmt.Errorf("cgroup %s: %w", filepath.Join(m+d, f), err)
					}
				}
			}
		}
	}
	return nil
}
