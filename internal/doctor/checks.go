package doctor

// Run, the checker every layer's checks share, and their common helpers.

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/inventory"
)

// Run performs every check over in and returns the report. It does no I/O.
func Run(in *Input) *Report {
	c := &checker{in: in, node: in.Node}
	if c.node == nil {
		c.node = &inventory.Node{}
	}
	c.devices()
	c.link()
	c.ibPorts()
	c.netns()
	c.sriov()
	c.gid()
	c.dev()
	c.memlock()
	c.route()
	c.nccl()
	c.cni()
	rep := &Report{Checks: c.out, Node: nodeView(in)}
	for _, ch := range rep.Checks {
		switch ch.Status {
		case Pass:
			rep.Summary.Pass++
		case Warn:
			rep.Summary.Warn++
		case Fail:
			rep.Summary.Fail++
		}
	}
	rep.Summary.Result = string(Pass)
	if rep.Summary.Warn > 0 {
		rep.Summary.Result = string(Warn)
	}
	if rep.Summary.Fail > 0 {
		rep.Summary.Result = string(Fail)
	}
	return rep
}

type checker struct {
	in   *Input
	node *inventory.Node
	out  []Check
}

func (c *checker) add(id string, st Status, msg, fix string) {
	sec := ""
	for _, ci := range Catalogue {
		if ci.ID == id {
			sec = ci.Section
		}
	}
	if st == Pass {
		fix = ""
	}
	c.out = append(c.out, Check{ID: id, Section: sec, Status: st, Message: msg, Fix: fix})
}

// subjects are the functions whose devices are checked one by one: PFs and
// NICs without SR-IOV. VFs are summarised per PF, except where only VFs are
// visible (a pod with an exclusive VF).
func (c *checker) subjects() []*inventory.Function {
	var pfs, vfs []*inventory.Function
	for _, f := range c.node.Functions {
		if !f.HasRDMA() {
			continue
		}
		if f.IsVF {
			vfs = append(vfs, f)
		} else {
			pfs = append(pfs, f)
		}
	}
	if len(pfs) > 0 {
		return pfs
	}
	return vfs
}

// devicePort is one port of one RDMA device with its function.
type devicePort struct {
	f    *inventory.Function
	dev  inventory.RDMADevice
	port inventory.Port
}

func (d devicePort) name() string {
	s := fmt.Sprintf("%s port %d", d.dev.Name, d.port.Num)
	if nd := d.f.Netdev(); nd != "" {
		s += " (" + nd + ")"
	}
	return s
}

func portsOf(fs []*inventory.Function) []devicePort {
	var out []devicePort
	for _, f := range fs {
		for _, d := range f.RDMA {
			for _, p := range d.Ports {
				out = append(out, devicePort{f, d, p})
			}
		}
	}
	return out
}

// allDevices returns every visible RDMA device name with its function.
func (c *checker) allDevices() ([]string, map[string]*inventory.Function) {
	var names []string
	by := map[string]*inventory.Function{}
	for _, f := range c.node.Functions {
		for _, d := range f.RDMA {
			names = append(names, d.Name)
			by[d.Name] = f
		}
	}
	sort.Slice(names, func(i, j int) bool { return natLess(names[i], names[j]) })
	return names, by
}

// ---- helpers ----

func isTrue(v string) bool {
	v = strings.TrimSpace(strings.ToLower(v))
	return v == "1" || v == "true" || v == "yes" || v == "on"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ifStr(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	out := append([]string(nil), s[:n]...)
	return append(out, fmt.Sprintf("… (%d more)", len(s)-n))
}

func appendUniq(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func bytesStr(b uint64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d bytes", b)
}

var numSuffix = regexp.MustCompile(`^(.*?)(\d+)$`)

// natLess orders mlx5_2 before mlx5_10.
func natLess(a, b string) bool {
	ma, mb := numSuffix.FindStringSubmatch(a), numSuffix.FindStringSubmatch(b)
	if ma != nil && mb != nil && ma[1] == mb[1] {
		x, _ := strconv.Atoi(ma[2])
		y, _ := strconv.Atoi(mb[2])
		return x < y
	}
	return a < b
}
