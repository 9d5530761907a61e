// Package nccl reads NCCL_DEBUG=INFO logs (one or many ranks, interleaved,
// with or without launcher prefixes) and nccl-tests output, and reports the
// transport NCCL chose per rank and overall, GPUDirect RDMA use, HCAs, the
// out-of-band interface, the NCCL version and the nccl-tests bandwidth table.
// It flags the silent fallback to sockets and mixed transports the seeds warn
// about, and compares a run against a baseline.
package nccl

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Transports.
const (
	TransportIB      = "IB"
	TransportSocket  = "Socket"
	TransportMixed   = "mixed"
	TransportUnknown = "unknown"
)

// Rank is what the log says about one NCCL rank (one GPU of one process).
type Rank struct {
	Rank      int      `json:"rank"` // -1 when no "comm ... rank N" line names it
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	Device    int      `json:"device"` // CUDA device, -1 if unknown
	Transport string   `json:"transport"`
	GDR       bool     `json:"gdr"`
	HCAs      []string `json:"hcas"`
	OOB       string   `json:"oob,omitempty"` // interface:address NCCL's IB/socket transport uses out of band
	Network   string   `json:"network,omitempty"`
	// Channels counts network channel connections by transport ("IB",
	// "Socket"); intra-node P2P/SHM channels are not counted.
	Channels map[string]int `json:"net_channels"`

	gdrDisabled bool
}

// TestRow is one line of the nccl-tests table (sizes in bytes, times in
// microseconds, bandwidths in GB/s as nccl-tests prints them).
type TestRow struct {
	Size      int64   `json:"size_bytes"`
	Count     int64   `json:"count"`
	Type      string  `json:"type"`
	Redop     string  `json:"redop"`
	OOPTimeUS float64 `json:"out_of_place_time_us"`
	OOPAlgBW  float64 `json:"out_of_place_algbw"`
	OOPBusBW  float64 `json:"out_of_place_busbw"`
	IPTimeUS  float64 `json:"in_place_time_us"`
	IPAlgBW   float64 `json:"in_place_algbw"`
	IPBusBW   float64 `json:"in_place_busbw"`
	Wrong     int64   `json:"wrong"`
}

// Problem is something the report flags.
type Problem struct {
	Severity string `json:"severity"` // error, warning, info
	Code     string `json:"code"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

// Report is the analysis of one run (one or several log files).
type Report struct {
	Files     []string `json:"files"`
	Version   string   `json:"nccl_version,omitempty"`
	Transport string   `json:"transport"`
	GDR       bool     `json:"gdr"`
	Ranks     []Rank   `json:"ranks"`
	NRanks    int      `json:"nranks,omitempty"`
	Hosts     []string `json:"hosts"`
	HCAs      []string `json:"hcas"`
	OOB       []string `json:"oob_interfaces"`
	// Env holds the NCCL variables the log says were set by environment.
	Env map[string]string `json:"env"`
	// BusBWAvg is nccl-tests' "Avg bus bandwidth", in GB/s as printed
	// (nil when the input has no nccl-tests summary).
	BusBWAvg  *float64  `json:"busbw_avg_gbps"`
	BusBWUnit string    `json:"busbw_unit"`
	Test      string    `json:"nccl_test,omitempty"`
	Rows      []TestRow `json:"nccl_tests_rows"`
	Warnings  []string  `json:"nccl_warnings"`
	Problems  []Problem `json:"problems"`
	Baseline  *Compare  `json:"baseline,omitempty"`

	noIBDevice bool
	oobBad     bool
	ranksByKey map[string]*Rank
	order      []string
	networks   map[string]bool
	gdrLines   bool
}

// Compare is a run set against a baseline run.
type Compare struct {
	Files     []string `json:"files"`
	Transport string   `json:"transport"`
	GDR       bool     `json:"gdr"`
	BusBWAvg  *float64 `json:"busbw_avg_gbps"`
	// Speedup is this run's average bus bandwidth over the baseline's.
	Speedup *float64 `json:"speedup,omitempty"`
	// Largest compares the largest message size both runs measured.
	Largest *SizeCompare `json:"largest_size,omitempty"`
}

// SizeCompare is the out-of-place bus bandwidth at one size in both runs.
type SizeCompare struct {
	Size     int64   `json:"size_bytes"`
	BusBW    float64 `json:"busbw"`
	Baseline float64 `json:"baseline_busbw"`
}

var (
	// host:pid:tid [dev] ... NCCL INFO|WARN message
	lineRE = regexp.MustCompile(`^([^\s:]+):(\d+):(\d+) \[([^\]]*)\].*?\bNCCL (INFO|WARN|TRACE|ABORT) ?(.*)$`)
	// launcher prefixes: OpenMPI --tag-output, kubectl logs --prefix/--timestamps, torchrun --tee.
	prefixRE  = regexp.MustCompile(`^(\[\d+,\d+\]<std(?:out|err)>:|\[pod/[^\]]+\] ?|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d) |\[(?:default|rank)\d+\]:\s?)`)
	versionRE = regexp.MustCompile(`NCCL version (\d+\.\d+\.\d+[^\s]*)`)
	ibUsingRE = regexp.MustCompile(`NET/IB\w* ?: Using (.*?);? ?OOB ([^\s:]+):([^<\s]+)`)
	hcaRE     = regexp.MustCompile(`\[\d+\]([^\s:\[\]]+):(\d+)/(IB|RoCE)`)
	sockUseRE = regexp.MustCompile(`NET/Socket ?: Using (.*)$`)
	sockIfRE  = regexp.MustCompile(`\[\d+\]([^\s:]+):([^<\s]+)<`)
	netRE     = regexp.MustCompile(`^Using network (.+?)\s*$`)
	envRE     = regexp.MustCompile(`^(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?\s*$`)
	commRE    = regexp.MustCompile(`comm 0x[0-9a-fA-F]+ rank (\d+) nranks (\d+) cudaDev (\d+)`)
	// "via NET/IB/0/GDRDMA", "via NET/IB/1(0)/GDRDMA", "via NET/IBext/0", "via NET/Socket/0"
	channelRE  = regexp.MustCompile(`Channel \d+(?:/\d+)? : .* via NET/([A-Za-z_]+)/(\S*)`)
	gdrOnRE    = regexp.MustCompile(`GPU Direct RDMA Enabled`)
	gdrOffRE   = regexp.MustCompile(`GPU Direct RDMA Disabled`)
	noDevRE    = regexp.MustCompile(`NET/IB ?: No device found`)
	testRankRE = regexp.MustCompile(`^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+) on\s+(\S+) device\s+(\d+)`)
	avgRE      = regexp.MustCompile(`^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)`)
	testNameRE = regexp.MustCompile(`^#\s*Collective test starting: (\S+)`)
	numRE      = regexp.MustCompile(`^\d+$`)
)

// Parse reads one or more logs belonging to the same run.
func Parse(names []string, readers []io.Reader) (*Report, error) {
	r := &Report{Files: names, Env: map[string]string{}, ranksByKey: map[string]*Rank{}, networks: map[string]bool{},
		Ranks: []Rank{}, Hosts: []string{}, HCAs: []string{}, OOB: []string{}, Rows: []TestRow{}, Warnings: []string{}, Problems: []Problem{}, BusBWUnit: "GB/s"}
	for i, rd := range readers {
		if err := r.read(rd); err != nil {
			name := fmt.Sprintf("input %d", i+1)
			if i < len(names) {
				name = names[i]
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	r.finish()
	return r, nil
}

func (r *Report) rank(host, pid, dev string) *Rank {
	key := host + ":" + pid + ":" + dev
	if rk, ok := r.ranksByKey[key]; ok {
		return rk
	}
	p, _ := strconv.Atoi(pid)
	d, err := strconv.Atoi(dev)
	if err != nil {
		d = -1
	}
	rk := &Rank{Rank: -1, Host: host, PID: p, Device: d, Channels: map[string]int{}, HCAs: []string{}}
	r.ranksByKey[key] = rk
	r.order = append(r.order, key)
	return rk
}

func (r *Report) read(rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		for {
			loc := prefixRE.FindStringIndex(line)
			if loc == nil || loc[1] == 0 {
				break
			}
			line = line[loc[1]:]
		}
		if m := versionRE.FindStringSubmatch(line); m != nil && r.Version == "" {
			r.Version = m[1]
		}
		if m := lineRE.FindStringSubmatch(line); m != nil {
			r.nccl(m[1], m[2], m[4], m[5], strings.TrimSpace(m[6]))
			continue
		}
		r.testLine(strings.TrimSpace(line))
	}
	return sc.Err()
}

func (r *Report) nccl(host, pid, dev, level, msg string) {
	rk := r.rank(host, pid, dev)
	if level == "WARN" {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s:%s [%s] %s", host, pid, dev, msg))
	}
	if m := ibUsingRE.FindStringSubmatch(msg); m != nil {
		for _, h := range hcaRE.FindAllStringSubmatch(m[1], -1) {
			name := h[1] + ":" + h[2] + "/" + h[3]
			if !contains(rk.HCAs, name) {
				rk.HCAs = append(rk.HCAs, name)
			}
		}
		rk.OOB = m[2] + ":" + m[3]
	}
	if m := sockUseRE.FindStringSubmatch(msg); m != nil && rk.OOB == "" {
		if s := sockIfRE.FindStringSubmatch(m[1]); s != nil {
			rk.OOB = s[1] + ":" + s[2]
		}
	}
	if m := netRE.FindStringSubmatch(msg); m != nil {
		rk.Network = netName(m[1])
		r.networks[rk.Network] = true
	}
	if m := envRE.FindStringSubmatch(msg); m != nil {
		r.Env[m[1]] = m[2]
	}
	if m := commRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		nr, _ := strconv.Atoi(m[2])
		d, _ := strconv.Atoi(m[3])
		if rk.Rank < 0 {
			rk.Rank = n
		}
		rk.Device = d
		if nr > r.NRanks {
			r.NRanks = nr
		}
	}
	if m := channelRE.FindStringSubmatch(msg); m != nil {
		t := netName(m[1])
		rk.Channels[t]++
		if strings.Contains(m[2], "GDRDMA") {
			rk.GDR = true
		}
	}
	if gdrOnRE.MatchString(msg) {
		r.gdrLines = true
	}
	if gdrOffRE.MatchString(msg) {
		rk.gdrDisabled = true
	}
	if noDevRE.MatchString(msg) {
		r.noIBDevice = true
	}
	if strings.Contains(msg, "no socket interface found") || strings.Contains(msg, "No usable listening interface found") {
		r.oobBad = true
	}
}

func (r *Report) testLine(l string) {
	if m := avgRE.FindStringSubmatch(l); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil {
			r.BusBWAvg = &v
		}
		return
	}
	if m := testNameRE.FindStringSubmatch(l); m != nil {
		r.Test = m[1]
		return
	}
	if strings.HasPrefix(l, "#") {
		return
	}
	f := strings.Fields(l)
	// size count type redop [root] time algbw busbw wrong time algbw busbw wrong
	if len(f) != 12 && len(f) != 13 {
		return
	}
	if !numRE.MatchString(f[0]) || !numRE.MatchString(f[1]) {
		return
	}
	off := 4
	if len(f) == 13 {
		off = 5
	}
	fl := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	in := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	for _, x := range []string{f[off], f[off+1], f[off+2], f[off+4], f[off+5], f[off+6]} {
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			return // not a table row
		}
	}
	row := TestRow{Size: in(f[0]), Count: in(f[1]), Type: f[2], Redop: f[3],
		OOPTimeUS: fl(f[off]), OOPAlgBW: fl(f[off+1]), OOPBusBW: fl(f[off+2]),
		IPTimeUS: fl(f[off+4]), IPAlgBW: fl(f[off+5]), IPBusBW: fl(f[off+6])}
	row.Wrong = int64(fl(f[off+3])) + int64(fl(f[off+7]))
	r.Rows = append(r.Rows, row)
}

func (r *Report) finish() {
	hosts, hcas, oobs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, k := range r.order {
		rk := r.ranksByKey[k]
		ib, sock := rk.Channels["IB"], rk.Channels["Socket"]
		switch {
		case ib > 0 && sock > 0:
			rk.Transport = TransportMixed
		case ib > 0:
			rk.Transport = TransportIB
		case sock > 0:
			rk.Transport = TransportSocket
		case rk.Network == "IB" || rk.Network == "Socket":
			rk.Transport = rk.Network
		default:
			rk.Transport = TransportUnknown
		}
		// A rank that logged nothing but its identity is not a rank worth
		// listing (e.g. a launcher line).
		if rk.Rank < 0 && rk.Transport == TransportUnknown && len(rk.HCAs) == 0 && rk.OOB == "" {
			continue
		}
		hosts[rk.Host] = true
		for _, h := range rk.HCAs {
			hcas[h] = true
		}
		if rk.OOB != "" {
			oobs[rk.OOB] = true
		}
		r.Ranks = append(r.Ranks, *rk)
	}
	sort.SliceStable(r.Ranks, func(i, j int) bool {
		a, b := r.Ranks[i], r.Ranks[j]
		if (a.Rank < 0) != (b.Rank < 0) {
			return a.Rank >= 0
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.PID < b.PID
	})
	r.Hosts, r.HCAs, r.OOB = keys(hosts), keys(hcas), keys(oobs)

	seen := map[string]bool{}
	for _, rk := range r.Ranks {
		if rk.Transport == TransportIB || rk.Transport == TransportSocket || rk.Transport == TransportMixed {
			seen[rk.Transport] = true
		}
	}
	switch {
	case seen[TransportMixed] || (seen[TransportIB] && seen[TransportSocket]):
		r.Transport = TransportMixed
	case seen[TransportIB]:
		r.Transport = TransportIB
	case seen[TransportSocket]:
		r.Transport = TransportSocket
	default:
		r.Transport = TransportUnknown
	}
	ibRanks, gdrRanks := 0, 0
	for _, rk := range r.Ranks {
		if rk.Channels["IB"] > 0 {
			ibRanks++
			if rk.GDR {
				gdrRanks++
			}
		}
	}
	r.GDR = r.Transport == TransportIB && ((ibRanks > 0 && gdrRanks == ibRanks) || (ibRanks == 0 && r.gdrLines))
	r.diagnose(ibRanks, gdrRanks)
}

func (r *Report) add(sev, code, msg, fix string) {
	r.Problems = append(r.Problems, Problem{Severity: sev, Code: code, Message: msg, Fix: fix})
}

// ibDisabledOnPurpose tells whether sockets were requested.
func (r *Report) ibDisabledOnPurpose() (string, bool) {
	if v, ok := r.Env["NCCL_IB_DISABLE"]; ok && strings.TrimSpace(v) != "0" {
		return "NCCL_IB_DISABLE=" + v, true
	}
	if v, ok := r.Env["NCCL_NET"]; ok && strings.EqualFold(v, "Socket") {
		return "NCCL_NET=" + v, true
	}
	return "", false
}

func (r *Report) diagnose(ibRanks, gdrRanks int) {
	why, onPurpose := r.ibDisabledOnPurpose()
	byT := map[string][]string{}
	for _, rk := range r.Ranks {
		byT[rk.Transport] = append(byT[rk.Transport], rk.label())
	}
	switch r.Transport {
	case TransportMixed:
		var parts []string
		for _, t := range []string{TransportIB, TransportSocket, TransportMixed, TransportUnknown} {
			if len(byT[t]) > 0 {
				parts = append(parts, fmt.Sprintf("%s: %s", t, strings.Join(byT[t], ", ")))
			}
		}
		r.add("error", "MIXED_TRANSPORT", "ranks use different network transports ("+strings.Join(parts, "; ")+"); the slowest link sets the pace of every collective", "compare the Socket ranks' pods/nodes with the IB ones: RDMA resource and networks annotation, IPC_LOCK, /dev/infiniband, the rdma CNI step, NCCL_IB_HCA/NCCL_SOCKET_IFNAME")
	case TransportSocket:
		if onPurpose {
			r.add("info", "SOCKET_BASELINE", fmt.Sprintf("transport is NET/Socket because %s was set: a TCP baseline run", why), "")
		} else {
			msg := "NCCL fell back to TCP sockets (NET/Socket) without NCCL_IB_DISABLE: RDMA is not in use"
			if r.noIBDevice {
				msg += "; the log says NET/IB found no device (no /dev/infiniband or no active RDMA port in the container)"
			}
			r.add("error", "SOCKET_FALLBACK", msg, "check the pod has an RDMA device (resource request, rdma CNI step in exclusive mode, /dev/infiniband), IPC_LOCK, an active port (ibv_devinfo), and that NCCL_IB_HCA does not filter every device out; lint the manifests with kubectl rdma lint")
		}
	case TransportUnknown:
		if len(r.Ranks) == 0 && len(r.Rows) > 0 {
			r.add("info", "NO_NCCL_INFO", "nccl-tests output without NCCL INFO lines: the transport cannot be told", "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET")
		} else if len(r.Hosts) <= 1 && len(r.Ranks) > 0 {
			r.add("warning", "SINGLE_NODE", "all ranks ran on one host and no network channel was set up: the RDMA path was not exercised", "run across at least two nodes; a wrong GID only shows across nodes")
		} else {
			r.add("info", "NO_TRANSPORT", "the log names no network transport", "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET")
		}
	}
	if r.Transport == TransportIB || (r.Transport == TransportMixed && ibRanks > 0) {
		if gdrRanks < ibRanks || (ibRanks == 0 && !r.GDR) {
			msg := "GPUDirect RDMA is not in use: IB channels have no /GDRDMA, data bounces through host memory"
			fix := "check nvidia-peermem (or dma-buf) is loaded and GPU and NIC share a PCIe switch; NCCL_NET_GDR_LEVEL widens the distance NCCL accepts"
			anyDisabled := false
			for _, rk := range r.Ranks {
				anyDisabled = anyDisabled || rk.gdrDisabled
			}
			if anyDisabled {
				msg += " (the log says \"GPU Direct RDMA Disabled\")"
			}
			if gdrRanks > 0 {
				msg = fmt.Sprintf("GPUDirect RDMA is used by %d of %d IB ranks only", gdrRanks, ibRanks)
			}
			r.add("warning", "NO_GDR", msg, fix)
		}
	}
	if r.oobBad {
		r.add("error", "NO_OOB_INTERFACE", "NCCL found no socket interface for bootstrap", "make NCCL_SOCKET_IFNAME match an interface the pod has (the annotation's @ifname, or eth0 on hostNetwork)")
	}
	if len(r.Warnings) > 0 {
		r.add("warning", "NCCL_WARN", fmt.Sprintf("%d NCCL WARN line(s), first: %s", len(r.Warnings), r.Warnings[0]), "")
	}
	var wrong int64
	for _, row := range r.Rows {
		wrong += row.Wrong
	}
	if wrong > 0 {
		r.add("error", "WRONG_RESULTS", fmt.Sprintf("nccl-tests counted %d wrong results", wrong), "data corruption on the path: check the fabric, PFC/ECN and firmware before trusting any bandwidth")
	}
}

func (rk Rank) label() string {
	if rk.Rank >= 0 {
		return fmt.Sprintf("rank %d (%s)", rk.Rank, rk.Host)
	}
	return fmt.Sprintf("%s:%d[%d]", rk.Host, rk.PID, rk.Device)
}

// CompareTo sets b as the baseline of r.
func (r *Report) CompareTo(b *Report) {
	c := &Compare{Files: b.Files, Transport: b.Transport, GDR: b.GDR, BusBWAvg: b.BusBWAvg}
	if r.BusBWAvg != nil && b.BusBWAvg != nil && *b.BusBWAvg > 0 {
		s := *r.BusBWAvg / *b.BusBWAvg
		c.Speedup = &s
	}
	sizes := map[int64]float64{}
	for _, row := range b.Rows {
		sizes[row.Size] = row.OOPBusBW
	}
	for _, row := range r.Rows {
		if bw, ok := sizes[row.Size]; ok && (c.Largest == nil || row.Size > c.Largest.Size) {
			c.Largest = &SizeCompare{Size: row.Size, BusBW: row.OOPBusBW, Baseline: bw}
		}
	}
	r.Baseline = c
	if c.Speedup != nil && *c.Speedup <= 1.0 && r.Transport == TransportIB && b.Transport == TransportSocket {
		r.add("warning", "NOT_FASTER_THAN_BASELINE", fmt.Sprintf("the IB run's average bus bandwidth (%.2f GB/s) is not above the socket baseline's (%.2f GB/s)", *r.BusBWAvg, *b.BusBWAvg), "check GID index, PFC/ECN, MTU and that the benchmark spans nodes")
	}
}

// Worst is the highest problem severity ("" if none).
func (r *Report) Worst() string {
	w := ""
	rank := map[string]int{"": 0, "info": 1, "warning": 2, "error": 3}
	for _, p := range r.Problems {
		if rank[p.Severity] > rank[w] {
			w = p.Severity
		}
	}
	return w
}

// netName folds NCCL network names: the IB verbs transport also appears as
// the external plugin "IBext" (SHARP/HPC-X net plugin).
func netName(n string) string {
	if strings.HasPrefix(n, "IB") {
		return TransportIB
	}
	return n
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
