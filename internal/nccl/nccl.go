// Package nccl reads NCCL logs as people paste them (NCCL_DEBUG=INFO or WARN
// output of one or many ranks, interleaved, behind launcher, kubectl or
// timestamp prefixes, NCCL 2.3 to 2.28 formats) and nccl-tests output, and
// reports the transport NCCL chose per rank and overall (IB, RoCE, Socket or
// a network plugin by name), GPUDirect RDMA per channel, HCAs, the
// out-of-band interface, the NCCL variables the log reports, the NCCL
// version and the nccl-tests bandwidth table. It names each failure class it
// recognises (silent socket fallback, mixed transports, no bootstrap
// interface, completion errors, QP setup failures, ...) with its fix, and
// compares a run against a baseline. It says only what the log shows.
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

// Transports. A network plugin is reported by the name NCCL logs for it
// ("IBext_v8", "AWS Libfabric", "Libfabric", ...).
const (
	// TransportIB is NCCL's NET/IB (verbs) on an InfiniBand link layer, or
	// on a link layer the log does not name (Rank.LinkLayer is then empty).
	TransportIB = "IB"
	// TransportRoCE is NCCL's NET/IB on an Ethernet link layer (RoCE).
	TransportRoCE    = "RoCE"
	TransportSocket  = "Socket"
	TransportMixed   = "mixed"
	TransportUnknown = "unknown"
)

// GPUDirect RDMA verdicts (Report.GDRVerdict).
const (
	GDRYes     = "yes"     // every network channel is /GDRDMA (or NCCL says GDR 1)
	GDRNo      = "no"      // no network channel is (sockets, or GDR disabled)
	GDRPartial = "partial" // some are, some are not
	GDRUnknown = "unknown" // the log does not show it
)

// RDMA tells whether a transport moves data by RDMA: NET/IB (IB, RoCE),
// the verbs plugins (IBext*), aws-ofi-nccl (Libfabric: EFA, Slingshot) and
// UCX. Socket, mixed, unknown and other plugins are not.
func RDMA(transport string) bool {
	t := strings.ToLower(transport)
	switch {
	case transport == TransportIB || transport == TransportRoCE:
		return true
	case strings.HasPrefix(t, "ib"):
		return true
	case strings.Contains(t, "libfabric") || strings.Contains(t, "ofi"):
		return true
	case strings.HasPrefix(t, "ucx"):
		return true
	}
	return false
}

// Rank is what the log says about one NCCL rank (one GPU of one process).
type Rank struct {
	Rank   int    `json:"rank"` // -1 when no "comm ... rank N" line names it
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	Device int    `json:"device"` // CUDA device, -1 if unknown
	// Transport is IB, RoCE, Socket, a plugin's name, mixed (network
	// channels on several) or unknown.
	Transport string `json:"transport"`
	// LinkLayer is IB or RoCE when the HCA list of NET/IB (or a verbs
	// plugin) names it for the devices the channels use; empty otherwise.
	LinkLayer string   `json:"link_layer,omitempty"`
	GDR       bool     `json:"gdr"` // every network channel is /GDRDMA
	HCAs      []string `json:"hcas"`
	OOB       string   `json:"oob,omitempty"` // interface:address NCCL's IB/socket transport uses out of band
	// Network is the network NCCL names for this rank ("Using network X",
	// or the NET/X of its channels), as NCCL spells it.
	Network string `json:"network,omitempty"`
	// Channels counts network channel connections by NCCL network name
	// ("IB", "Socket", "IBext_v8", ...); intra-node P2P/SHM channels are
	// not counted. GDRChannels counts those of them that are /GDRDMA.
	Channels    map[string]int `json:"net_channels"`
	GDRChannels int            `json:"gdr_channels"`
	// LocalChannels counts intra-node channel connections (P2P, SHM).
	LocalChannels int `json:"local_channels"`
	// Env holds the NCCL variables this rank's lines report.
	Env map[string]string `json:"env,omitempty"`

	hcaLL        map[int]string // HCA index -> link layer
	channelDevs  map[int]bool   // NET device indices the channels use
	noIBDevice   bool
	noVerbs      bool
	ibInitFailed string // the line that says NET/IB's init returned an error
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
	// GDR is true when the GPUDirect RDMA verdict is yes.
	GDR bool `json:"gdr"`
	// GDRVerdict is yes, no, partial or unknown (see the GDR* constants).
	GDRVerdict string `json:"gdr_verdict"`
	// LinkLayer is IB or RoCE when every rank whose HCAs the log names
	// agrees; empty when the log names none (transport IB then means
	// NET/IB on a link layer the log does not show) or they differ.
	LinkLayer string   `json:"link_layer,omitempty"`
	Ranks     []Rank   `json:"ranks"`
	NRanks    int      `json:"nranks,omitempty"`
	Hosts     []string `json:"hosts"`
	HCAs      []string `json:"hcas"`
	OOB       []string `json:"oob_interfaces"`
	// Env holds the NCCL variables the log reports ("X set by environment
	// to V", "X set to V"); the first value seen when ranks differ (each
	// rank's own are in Rank.Env).
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

	ranksByKey map[string]*Rank
	order      []string
	infoLines  int
	warnLines  int
	failures   []*failure // in order of first appearance
	byCode     map[string]*failure
	gdrSaid    string // GDRYes/GDRNo from lines other than channels
	noModule   bool   // "GPU Direct RDMA Disabled ... (no module)"
	mismatch   []string
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
	// ANSI colour and cursor sequences left in a paste.
	ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
	// host:pid:tid [dev] [file:line | timestamp file:line] NCCL INFO|WARN message,
	// anywhere in the line: whatever precedes it (NCCL's own timestamps,
	// launcher and kubectl prefixes, log collectors' columns) is skipped.
	lineRE = regexp.MustCompile(`([^\s:|]+):(\d+):(\d+) \[(-?\d+)\][^\n]*?\bNCCL (INFO|WARN|TRACE|ABORT)\b ?(.*)$`)
	// launcher prefixes: OpenMPI --tag-output, kubectl logs --prefix/--timestamps, torchrun --tee,
	// log collectors' "| timestamp |" columns.
	prefixRE  = regexp.MustCompile(`^(\s*\|\s*|\[\d+,\d+\]<std(?:out|err)>:|\[pod/[^\]]+\] ?|\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?(?:\s*\|)? ?|\[(?:default|rank)?\d+\]:?\s?|\[[\w.-]+(?:\|\d+)?\]:)`)
	versionRE = regexp.MustCompile(`NCCL version:? ?(\d+\.\d+\.\d+[^\s,]*)`)
	ibUsingRE = regexp.MustCompile(`NET/IB\w* ?: Using (.*?);? ?OOB ([^\s:]+):([^<\s]+)`)
	hcaRE     = regexp.MustCompile(`\[(\d+)\]([^\s:\[\]]+):(\d+)/(IB|RoCE)`)
	// NCCL 2.3: "NET/IB: [0] mlx5_0:1/IB" per device, "Using interface ib0 for sideband communication".
	oldHCARE  = regexp.MustCompile(`^NET/IB\w*: \[(\d+)\] ([^\s:]+):(\d+)/(IB|RoCE)\s*$`)
	oldOOBRE  = regexp.MustCompile(`^NET/IB\w* : Using interface (\S+) for sideband communication`)
	sockUseRE = regexp.MustCompile(`NET/Socket ?: Using (.*)$`)
	sockIfRE  = regexp.MustCompile(`\[\d+\]([^\s:]+):([^<\s]+)<`)
	netRE     = regexp.MustCompile(`^(?:Using (?:network|internal Network|external Network) (.+?)|Assigned NET plugin (.+?) to comm)\s*$`)
	envRE     = regexp.MustCompile(`^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\s*$`)
	commRE    = regexp.MustCompile(`comm 0x[0-9a-fA-F]+ rank (\d+) n[Rr]anks (\d+)(?: .*?cudaDev (\d+))?`)
	// "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA", "Ring 00 : 3 -> 0 via NET/IB/0/GDRDMA" (2.3-2.6),
	// "via NET/IBext_v8/1(0)/GDRDMA(PCI)/Shared", "via NET/AWS Libfabric/0"
	channelRE  = regexp.MustCompile(`(?:Channel|Ring) \d+(?:/\d+)? : .* via NET/(.+?)/(\d+)(?:\(\d+\))?(\S*)`)
	localRE    = regexp.MustCompile(`(?:Channel|Ring) \d+(?:/\d+)? : .* via (?:P2P|SHM|direct shared memory)`)
	gdrForGPU  = regexp.MustCompile(`GPU Direct RDMA (Enabled|Disabled) for GPU`)
	gdrNoMod   = regexp.MustCompile(`GPU Direct RDMA Disabled for .*\(no module`)
	ringGDRRE  = regexp.MustCompile(`Connected all rings, use ring PXN \d+ GDR (\d)`)
	noDevRE    = regexp.MustCompile(`NET/IB\w* ?: No device found`)
	noVerbsRE  = regexp.MustCompile(`Failed to open libibverbs`)
	ibRetRE    = regexp.MustCompile(`^(?:\S*/)?net_ib(?:/\w+)?\.cc:\d+ -> \d+|^Failed to initialize NET plugin IB\b`)
	avgRE      = regexp.MustCompile(`^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)`)
	testNameRE = regexp.MustCompile(`^#\s*Collective test starting: (\S+)`)
	numRE      = regexp.MustCompile(`^\d+$`)
)

// Parse reads one or more logs belonging to the same run.
func Parse(names []string, readers []io.Reader) (*Report, error) {
	r := &Report{Files: names, Env: map[string]string{}, ranksByKey: map[string]*Rank{}, byCode: map[string]*failure{},
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
	rk := &Rank{Rank: -1, Host: host, PID: p, Device: d, Channels: map[string]int{}, HCAs: []string{},
		hcaLL: map[int]string{}, channelDevs: map[int]bool{}}
	r.ranksByKey[key] = rk
	r.order = append(r.order, key)
	return rk
}

// stripPrefixes removes what launchers, kubectl and log collectors put
// before a line.
func stripPrefixes(line string) string {
	for {
		loc := prefixRE.FindStringIndex(line)
		if loc == nil || loc[1] == 0 {
			return line
		}
		line = line[loc[1]:]
	}
}

func (r *Report) read(rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.IndexByte(line, 0x1b) >= 0 {
			line = ansiRE.ReplaceAllString(line, "")
		}
		line = stripPrefixes(line)
		if m := versionRE.FindStringSubmatch(line); m != nil && r.Version == "" {
			r.Version = m[1]
		}
		if m := lineRE.FindStringSubmatch(line); m != nil {
			r.nccl(m[1], m[2], m[4], m[5], strings.TrimSpace(m[6]))
			continue
		}
		l := strings.TrimSpace(line)
		// NCCL's own messages outside its debug lines: PyTorch's
		// "Last error:" paragraph, a launcher's error summary.
		r.classify(nil, "", l)
		r.testLine(l)
	}
	return sc.Err()
}

func (r *Report) nccl(host, pid, dev, level, msg string) {
	rk := r.rank(host, pid, dev)
	switch level {
	case "WARN":
		r.warnLines++
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s:%s [%s] %s", host, pid, dev, msg))
	case "INFO":
		r.infoLines++
	}
	r.classify(rk, host+":"+pid, msg)
	if m := ibUsingRE.FindStringSubmatch(msg); m != nil {
		for _, h := range hcaRE.FindAllStringSubmatch(m[1], -1) {
			rk.addHCA(h[1], h[2], h[3], h[4])
		}
		rk.OOB = m[2] + ":" + m[3]
	}
	if m := oldHCARE.FindStringSubmatch(msg); m != nil {
		rk.addHCA(m[1], m[2], m[3], m[4])
	}
	if m := oldOOBRE.FindStringSubmatch(msg); m != nil && rk.OOB == "" {
		rk.OOB = m[1]
	}
	if m := sockUseRE.FindStringSubmatch(msg); m != nil && rk.OOB == "" {
		if s := sockIfRE.FindStringSubmatch(m[1]); s != nil {
			rk.OOB = s[1] + ":" + s[2]
		}
	}
	if m := netRE.FindStringSubmatch(msg); m != nil {
		rk.Network = m[1] + m[2]
	}
	if m := envRE.FindStringSubmatch(msg); m != nil {
		v := m[2]
		// NCCL's integer parameters end their line with a period ("to 1.").
		if t := strings.TrimSuffix(v, "."); t != v {
			if _, err := strconv.ParseInt(t, 10, 64); err == nil {
				v = t
			}
		}
		if rk.Env == nil {
			rk.Env = map[string]string{}
		}
		rk.Env[m[1]] = v
		if _, ok := r.Env[m[1]]; !ok {
			r.Env[m[1]] = v
		}
	}
	if m := commRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		nr, _ := strconv.Atoi(m[2])
		if rk.Rank < 0 {
			rk.Rank = n
		}
		if m[3] != "" {
			rk.Device, _ = strconv.Atoi(m[3])
		}
		if nr > r.NRanks {
			r.NRanks = nr
		}
	}
	if m := channelRE.FindStringSubmatch(msg); m != nil {
		rk.Channels[m[1]]++
		d, _ := strconv.Atoi(m[2])
		rk.channelDevs[d] = true
		if strings.Contains(m[3], "GDRDMA") {
			rk.GDRChannels++
		}
	} else if localRE.MatchString(msg) {
		rk.LocalChannels++
	}
	if m := gdrForGPU.FindStringSubmatch(msg); m != nil {
		r.sayGDR(m[1] == "Enabled")
	}
	if m := ringGDRRE.FindStringSubmatch(msg); m != nil {
		r.sayGDR(m[1] == "1")
	}
	if gdrNoMod.MatchString(msg) {
		r.noModule = true
		r.sayGDR(false)
	}
	if noDevRE.MatchString(msg) {
		rk.noIBDevice = true
	}
	if noVerbsRE.MatchString(msg) {
		rk.noVerbs = true
	}
	if ibRetRE.MatchString(msg) && rk.ibInitFailed == "" {
		rk.ibInitFailed = msg
	}
}

// sayGDR records a GPUDirect RDMA statement that is not a channel line; a
// "no" anywhere wins over a "yes" elsewhere (the verdict is then partial
// when channels do not settle it).
func (r *Report) sayGDR(on bool) {
	switch {
	case on && r.gdrSaid == "":
		r.gdrSaid = GDRYes
	case on && r.gdrSaid == GDRNo, !on && r.gdrSaid == GDRYes:
		r.gdrSaid = GDRPartial
	case !on && r.gdrSaid == "":
		r.gdrSaid = GDRNo
	}
}

func (rk *Rank) addHCA(idx, dev, port, ll string) {
	name := dev + ":" + port + "/" + ll
	if !contains(rk.HCAs, name) {
		rk.HCAs = append(rk.HCAs, name)
	}
	i, _ := strconv.Atoi(idx)
	rk.hcaLL[i] = ll
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

// transport of one rank: from its network channels, else from the network
// NCCL says it uses; NET/IB splits into IB and RoCE by the link layer of
// the HCAs the channels use.
func (rk *Rank) transport() string {
	var nets []string
	for n, c := range rk.Channels {
		if c > 0 {
			nets = append(nets, n)
		}
	}
	switch {
	case len(nets) > 1:
		return TransportMixed
	case len(nets) == 0 && rk.Network == "":
		return TransportUnknown
	case len(nets) == 0:
		nets = []string{rk.Network}
	}
	n := nets[0]
	lls := map[string]bool{}
	for d := range rk.channelDevs {
		if ll, ok := rk.hcaLL[d]; ok {
			lls[ll] = true
		}
	}
	if len(lls) == 0 {
		for _, ll := range rk.hcaLL {
			lls[ll] = true
		}
	}
	if len(lls) == 1 {
		for ll := range lls {
			rk.LinkLayer = ll
		}
	}
	switch {
	case n == "IB" && len(lls) > 1:
		return TransportMixed
	case n == "IB" && rk.LinkLayer == "RoCE":
		return TransportRoCE
	case n == "IB":
		return TransportIB
	case n == "Socket":
		return TransportSocket
	}
	return n
}

func (rk *Rank) netChannels() int {
	n := 0
	for _, c := range rk.Channels {
		n += c
	}
	return n
}

func (r *Report) finish() {
	// A run on one host whose ranks set up intra-node channels only did
	// not use the network NCCL picked ("Using network Socket" on a
	// single-node run is no socket fallback).
	runHosts, netCh, localCh := map[string]bool{}, 0, 0
	for _, rk := range r.ranksByKey {
		runHosts[rk.Host] = true
		netCh += rk.netChannels()
		localCh += rk.LocalChannels
	}
	netUnused := netCh == 0 && localCh > 0 && len(runHosts) == 1
	hosts, hcas, oobs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, k := range r.order {
		rk := r.ranksByKey[k]
		rk.Transport = rk.transport()
		if netUnused {
			rk.Transport = TransportUnknown
		}
		rk.GDR = rk.netChannels() > 0 && rk.GDRChannels == rk.netChannels()
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
		if rk.Transport != TransportUnknown {
			seen[rk.Transport] = true
		}
	}
	switch {
	case len(seen) > 1 || seen[TransportMixed] || len(r.mismatch) > 0:
		r.Transport = TransportMixed
	case len(seen) == 1:
		for t := range seen {
			r.Transport = t
		}
	default:
		r.Transport = TransportUnknown
	}
	lls := map[string]bool{}
	for _, rk := range r.Ranks {
		if rk.LinkLayer != "" {
			lls[rk.LinkLayer] = true
		}
	}
	if len(lls) == 1 {
		r.LinkLayer = keys(lls)[0]
	}
	r.GDRVerdict = r.gdrVerdict()
	r.GDR = r.GDRVerdict == GDRYes
	r.diagnose()
}

func (r *Report) gdrVerdict() string {
	net, gdr := 0, 0
	for _, rk := range r.Ranks {
		net += rk.netChannels()
		gdr += rk.GDRChannels
	}
	switch {
	case r.Transport == TransportUnknown:
		return GDRUnknown
	case r.Transport == TransportSocket:
		return GDRNo
	case net > 0 && gdr == net:
		return GDRYes
	case net > 0 && gdr == 0:
		return GDRNo
	case net > 0:
		return GDRPartial
	case r.gdrSaid != "":
		return r.gdrSaid
	}
	return GDRUnknown
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
	if c.Speedup != nil && *c.Speedup <= 1.0 && RDMA(r.Transport) && b.Transport == TransportSocket {
		r.add("warning", "NOT_FASTER_THAN_BASELINE", fmt.Sprintf("the %s run's average bus bandwidth (%.2f GB/s) is not above the socket baseline's (%.2f GB/s)", r.Transport, *r.BusBWAvg, *b.BusBWAvg), "check GID index, PFC/ECN, MTU and that the benchmark spans nodes")
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
