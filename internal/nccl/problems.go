package nccl

// Failure classes: which NCCL messages name which problem, and the
// diagnosis of a whole run.

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// failure is one failure class seen in the log.
type failure struct {
	code   string
	count  int
	first  string // where (host:pid) and the message of the first line
	detail string // what the first line says beyond its class (status, errno text)
	hosts  map[string]bool
}

// failureClass maps NCCL messages to a problem code. ncclOnly classes are
// matched in NCCL's debug lines only (their wording is common elsewhere);
// the others also in NCCL's error summaries (PyTorch's "Last error:").
type failureClass struct {
	code     string
	re       *regexp.Regexp
	ncclOnly bool
}

var failureClasses = []failureClass{
	{code: "NO_OOB_INTERFACE", re: regexp.MustCompile(`Bootstrap ?: no socket interface found|No usable listening interface found|NET/Socket ?: no interface found|No interface found in the same subnet|NET/IB\w* ?: No IP interface found|no device found (?:matching|after excluding) .*NCCL_OOB_NET_IFNAME|ncclSocketInit: connecting to address .*is neither AF_INET`)},
	{code: "SOCKET_TYPE_MISMATCH", re: regexp.MustCompile(`socketFinalizeAccept.*: wrong type (\d+) != (\d+)`)},
	{code: "IB_INCOMPATIBLE_DEVICES", re: regexp.MustCompile(`Attempted to connect incompatible devices: (.*?)\.? Try|device is incompatible with the local (\S+)`)},
	{code: "IB_COMPLETION", re: regexp.MustCompile(`Got completion (?:from peer (\S+) )?with (?:error |status=)(?:[A-Z_]+\()?(\d+)`)},
	{code: "IB_MEMLOCK", re: regexp.MustCompile(`Call to ibv_(?:reg_mr\w*|reg_dmabuf_mr|create_cq|create_qp|alloc_pd)\w* failed with (?:error )?(?:\d+ )?Cannot allocate memory`)},
	{code: "IB_MODIFY_QP", re: regexp.MustCompile(`Call to ibv_modify_qp failed with (?:error )?(?:\d+ )?([^,]+)`)},
	{code: "PEER_UNREACHABLE", ncclOnly: true, re: regexp.MustCompile(`(?i)connect to (\S+) (?:failed ?: |returned .*exceeded error retry count|failed with error)(.*)|Connection closed by remote peer (\S+)|Call to (?:recv|send) .* failed ?: (Connection reset by peer|Connection timed out|Broken pipe)`)},
}

// wcStatus names ibv_wc_status values (verbs.h).
var wcStatus = map[int]string{
	1: "IBV_WC_LOC_LEN_ERR", 2: "IBV_WC_LOC_QP_OP_ERR", 3: "IBV_WC_LOC_EEC_OP_ERR", 4: "IBV_WC_LOC_PROT_ERR",
	5: "IBV_WC_WR_FLUSH_ERR", 6: "IBV_WC_MW_BIND_ERR", 7: "IBV_WC_BAD_RESP_ERR", 8: "IBV_WC_LOC_ACCESS_ERR",
	9: "IBV_WC_REM_INV_REQ_ERR", 10: "IBV_WC_REM_ACCESS_ERR", 11: "IBV_WC_REM_OP_ERR", 12: "IBV_WC_RETRY_EXC_ERR",
	13: "IBV_WC_RNR_RETRY_EXC_ERR", 14: "IBV_WC_LOC_RDD_VIOL_ERR", 15: "IBV_WC_REM_INV_RD_REQ_ERR",
	16: "IBV_WC_REM_ABORT_ERR", 17: "IBV_WC_INV_EECN_ERR", 18: "IBV_WC_INV_EEC_STATE_ERR", 19: "IBV_WC_FATAL_ERR",
	20: "IBV_WC_RESP_TIMEOUT_ERR", 21: "IBV_WC_GENERAL_ERR",
}

// completionCode is the problem a completion status names.
func completionCode(status int) string {
	switch status {
	case 12:
		return "IB_RETRY_EXCEEDED"
	case 13:
		return "IB_RNR_RETRY_EXCEEDED"
	case 4:
		return "IB_LOCAL_PROTECTION"
	case 10:
		return "IB_REMOTE_ACCESS"
	}
	return "IB_COMPLETION_ERROR"
}

// classify records the failure class msg belongs to, if any. rk is nil for
// lines that are not NCCL debug lines.
func (r *Report) classify(rk *Rank, where, msg string) {
	if msg == "" {
		return
	}
	for _, fc := range failureClasses {
		if fc.ncclOnly && rk == nil {
			continue
		}
		m := fc.re.FindStringSubmatch(msg)
		if m == nil || (fc.code == "IB_MODIFY_QP" && strings.Contains(msg, ", retrying")) {
			continue
		}
		code, detail := fc.code, strings.TrimSpace(strings.Join(m[1:], " "))
		switch fc.code {
		case "IB_COMPLETION":
			st, _ := strconv.Atoi(m[2])
			code, detail = completionCode(st), m[2]
		case "SOCKET_TYPE_MISMATCH", "IB_INCOMPATIBLE_DEVICES":
			r.mismatch = append(r.mismatch, msg)
		}
		r.fail(code, where, msg, detail)
		return
	}
}

func (r *Report) fail(code, where, msg, detail string) {
	f, ok := r.byCode[code]
	if !ok {
		first := msg
		if where != "" {
			first = where + ": " + msg
		}
		f = &failure{code: code, first: first, detail: detail, hosts: map[string]bool{}}
		r.byCode[code] = f
		r.failures = append(r.failures, f)
	}
	f.count++
	if h, _, ok := strings.Cut(where, ":"); ok {
		f.hosts[h] = true
	}
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

const (
	fixRDMADevice  = "check the pod has an RDMA device (resource request, rdma CNI step in exclusive mode, /dev/infiniband), IPC_LOCK, an active port (ibv_devinfo), and that NCCL_IB_HCA does not filter every device out; lint the manifests with kubectl rdma lint"
	fixDebug       = "run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (kubectl rdma render --nccl-debug) and give the whole log of the training container, from the start of the run"
	fixOOB         = "make NCCL_SOCKET_IFNAME name an interface the pod has, with an address: the networks annotation's @ifname (net1) in exclusive and shared mode, the node's interface on hostNetwork ('=' asks for the exact name, '^' excludes); check with ip -br addr in the pod or kubectl rdma doctor"
	fixMixedRanks  = "compare the pods/nodes of the Socket ranks with the RDMA ones: RDMA resource and networks annotation, IPC_LOCK, /dev/infiniband, the rdma CNI step, NCCL_IB_DISABLE/NCCL_NET/NCCL_IB_HCA/NCCL_SOCKET_IFNAME; every rank must end up on the same transport"
	fixPeerFirst   = "read the peer rank's log for the first error (the peer may have crashed or hung before this rank noticed)"
	fixGIDAndRoute = "on RoCE set NCCL_IB_GID_INDEX to the port's RoCEv2 IPv4 GID (kubectl rdma doctor, check nccl-gid-index), give the RDMA netdev (net1) its address before NCCL starts and keep every rank in one reachable training subnet; on IB check the port is ACTIVE and the subnet manager gave it a LID"
)

func (r *Report) diagnose() {
	why, onPurpose := r.ibDisabledOnPurpose()
	switch r.Transport {
	case TransportMixed:
		r.mixed()
	case TransportSocket:
		r.socket(why, onPurpose)
	case TransportUnknown:
		r.unknown()
	}
	r.gdrProblems()
	for _, f := range r.failures {
		r.failureProblem(f)
	}
	r.ibFindings()
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

func (r *Report) unknown() {
	ncclLines := r.infoLines + r.warnLines
	switch {
	case ncclLines == 0 && len(r.Rows) > 0:
		r.add("info", "NO_NCCL_INFO", "nccl-tests output without NCCL INFO lines: the transport cannot be told", fixDebug)
	case ncclLines == 0 && len(r.failures) > 0:
		r.add("info", "NO_NCCL_INFO", "the log has NCCL's error summary but no NCCL debug lines (host:pid:tid [dev] NCCL INFO …): the transport cannot be told", fixDebug)
	case ncclLines == 0:
		r.add("warning", "NO_NCCL_LINES", "the input has no NCCL lines (host:pid:tid [dev] NCCL INFO|WARN …) and no nccl-tests output", fixDebug)
	case r.infoLines == 0:
		r.add("info", "NO_TRANSPORT", "the log has NCCL WARN lines only (NCCL_DEBUG=WARN): the transport is in the INFO lines", fixDebug)
	case len(r.failures) > 0:
		// NCCL stopped before setting up a network channel; the failure
		// named below says why.
	case len(r.Hosts) <= 1 && len(r.Ranks) > 0:
		r.add("warning", "SINGLE_NODE", "all ranks ran on one host and no network channel was set up: the RDMA path was not exercised", "run across at least two nodes; a wrong GID only shows across nodes")
	default:
		r.add("info", "NO_TRANSPORT", "the log has NCCL INFO lines but none names the network: NCCL_DEBUG_SUBSYS leaves out INIT and NET, or the log stops before the communicator was set up", fixDebug)
	}
}

// hostsOf lists the hosts of ranks for which pick is true.
func (r *Report) hostsOf(pick func(rk *Rank) bool) []string {
	hs := map[string]bool{}
	for _, k := range r.order {
		if rk := r.ranksByKey[k]; pick(rk) {
			hs[rk.Host] = true
		}
	}
	return keys(hs)
}

func (r *Report) socket(why string, onPurpose bool) {
	if onPurpose {
		r.add("info", "SOCKET_BASELINE", fmt.Sprintf("transport is NET/Socket because %s was set: a TCP baseline run", why), "")
		return
	}
	noVerbs := r.hostsOf(func(rk *Rank) bool { return rk.noVerbs })
	noDev := r.hostsOf(func(rk *Rank) bool { return rk.noIBDevice })
	initFailed := r.hostsOf(func(rk *Rank) bool { return rk.ibInitFailed != "" })
	ibNoIP := false
	if f := r.byCode["NO_OOB_INTERFACE"]; f != nil {
		ibNoIP = strings.Contains(f.first, "No IP interface found")
	}
	const fell = "NCCL fell back to TCP sockets (NET/Socket): RDMA is not in use; "
	switch {
	case len(noVerbs) > 0:
		r.add("error", "SOCKET_FALLBACK", fell+"NET/IB could not load libibverbs (\"Failed to open libibverbs.so\" on "+strings.Join(noVerbs, ", ")+")",
			"install rdma-core's libibverbs and the HCA's provider (libmlx5) in the training image: the device plugin gives the pod /dev/infiniband, not the library")
	case len(noDev) > 0:
		r.add("error", "SOCKET_FALLBACK", fell+"NET/IB found no device on "+strings.Join(noDev, ", ")+" (no /dev/infiniband or no active RDMA port in the container)", fixRDMADevice)
	case ibNoIP:
		r.add("error", "SOCKET_FALLBACK", fell+"NET/IB found no IP interface for its out-of-band connection", fixOOB)
	default:
		msg := "NCCL used NET/Socket: IB was disabled or failed to initialise, and the log does not show which"
		if len(initFailed) > 0 {
			var first string
			for _, k := range r.order {
				if rk := r.ranksByKey[k]; rk.ibInitFailed != "" {
					first = rk.ibInitFailed
					break
				}
			}
			msg += fmt.Sprintf(" (NET/IB's init returned an error before looking for devices on %s: %q; NCCL_IB_DISABLE=1 does that)", strings.Join(initFailed, ", "), first)
		}
		if len(r.Env) > 0 {
			msg += "; NCCL_IB_DISABLE and NCCL_NET are not among the NCCL variables the log reports"
		}
		r.add("warning", "IB_DISABLED_OR_FAILED", msg,
			"if the run should use RDMA: unset NCCL_IB_DISABLE and NCCL_NET=Socket (pod env, /etc/nccl.conf, ~/.nccl.conf), then "+fixRDMADevice+"; NCCL_DEBUG_SUBSYS=INIT,NET,ENV makes the log show the NCCL variables")
	}
}

func (r *Report) mixed() {
	byT := map[string][]string{}
	for _, rk := range r.Ranks {
		byT[rk.Transport] = append(byT[rk.Transport], rk.label())
	}
	ts := make([]string, 0, len(byT))
	for t := range byT {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s: %s", t, strings.Join(byT[t], ", ")))
	}
	msg := "ranks use different network transports"
	if len(parts) > 0 {
		msg += " (" + strings.Join(parts, "; ") + ")"
	}
	msg += "; the slowest link sets the pace of every collective, or the ranks cannot connect at all"
	if len(r.mismatch) > 0 {
		msg += fmt.Sprintf("; NCCL says so: %q", r.mismatch[0])
		if strings.Contains(r.mismatch[0], "wrong type") {
			msg += " (socket type 3 is NET/Socket, 4 is NET/IB)"
		}
	}
	if noDev := r.hostsOf(func(rk *Rank) bool { return rk.noIBDevice }); len(noDev) > 0 {
		msg += "; NET/IB found no device on " + strings.Join(noDev, ", ")
	}
	msg += r.envDiffers("NCCL_IB_DISABLE", "NCCL_NET", "NCCL_IB_HCA")
	fix := fixMixedRanks
	if len(r.mismatch) > 0 && strings.Contains(r.mismatch[0], "incompatible") {
		fix = "select HCAs of one link layer (all InfiniBand or all RoCE) on every node with NCCL_IB_HCA; " + fix
	}
	r.add("error", "MIXED_TRANSPORT", msg, fix)
}

// envDiffers says which of vars the ranks with a transport do not all
// report alike: "; NCCL_IB_DISABLE=1 on gpu-a only", "; ranks set
// NCCL_IB_HCA differently (=mlx5_0 on a, =mlx5_2 on b)".
func (r *Report) envDiffers(vars ...string) string {
	var out string
	for _, v := range vars {
		byVal := map[string]map[string]bool{} // value -> hosts
		unset := false
		for _, k := range r.order {
			rk := r.ranksByKey[k]
			if rk.transport() == TransportUnknown {
				continue
			}
			val, ok := rk.Env[v]
			if !ok {
				unset = true
				continue
			}
			if byVal[val] == nil {
				byVal[val] = map[string]bool{}
			}
			byVal[val][rk.Host] = true
		}
		switch {
		case len(byVal) > 1:
			var parts []string
			for _, val := range slices.Sorted(maps.Keys(byVal)) {
				parts = append(parts, fmt.Sprintf("%s on %s", val, strings.Join(keys(byVal[val]), ", ")))
			}
			out += fmt.Sprintf("; ranks set %s differently (%s)", v, strings.Join(parts, "; "))
		case len(byVal) == 1 && unset:
			for val, hs := range byVal {
				out += fmt.Sprintf("; %s=%s on %s only", v, val, strings.Join(keys(hs), ", "))
			}
		}
	}
	return out
}

func (r *Report) gdrProblems() {
	net, gdr := 0, 0
	rdma := RDMA(r.Transport)
	for _, rk := range r.Ranks {
		if RDMA(rk.Transport) {
			rdma = true
			net += rk.netChannels()
			gdr += rk.GDRChannels
		}
	}
	if !rdma {
		return
	}
	fix := "check nvidia-peermem (or dma-buf) is loaded and GPU and NIC share a PCIe switch; NCCL_NET_GDR_LEVEL widens the distance NCCL accepts"
	var msg string
	switch {
	case net > 0 && gdr == 0, net == 0 && r.gdrSaid == GDRNo:
		msg = "GPUDirect RDMA is not in use: network channels have no /GDRDMA, data bounces through host memory"
	case net > 0 && gdr < net:
		msg = fmt.Sprintf("GPUDirect RDMA on %d of %d network channels only", gdr, net)
	default:
		return
	}
	if r.noModule {
		msg += " (the log says \"GPU Direct RDMA Disabled … (no module)\": nvidia-peermem is not loaded on the node)"
	}
	r.add("warning", "NO_GDR", msg, fix)
}

func (f *failure) on() string {
	if len(f.hosts) == 0 {
		return ""
	}
	return " on " + strings.Join(keys(f.hosts), ", ")
}

func (r *Report) failureProblem(f *failure) {
	first := fmt.Sprintf("%q", f.first)
	if f.count > 1 {
		first = fmt.Sprintf("%d lines%s, first %q", f.count, f.on(), f.first)
	}
	switch f.code {
	case "NO_OOB_INTERFACE":
		msg := "NCCL found no network interface for its bootstrap/out-of-band sockets: " + first
		if v, ok := r.Env["NCCL_SOCKET_IFNAME"]; ok {
			msg += fmt.Sprintf("; NCCL_SOCKET_IFNAME=%s matches no interface with an address", v)
		}
		r.add("error", "NO_OOB_INTERFACE", msg, fixOOB)
	case "SOCKET_TYPE_MISMATCH", "IB_INCOMPATIBLE_DEVICES":
		// named by MIXED_TRANSPORT
	case "IB_RETRY_EXCEEDED":
		fix := fixPeerFirst + "; check both ports (ibv_devinfo, link counters) and the switch path; on RoCE check NCCL_IB_GID_INDEX, VLAN, MTU and PFC/ECN; a congested fabric may need a larger NCCL_IB_TIMEOUT"
		if ib, _ := r.ibRanks(); len(ib) > 0 {
			fix += "; on InfiniBand both ports must be full members of one partition: a GUID the subnet manager did not add to the network's PKey gets no acknowledgement (kubectl rdma verify: ib-pkey, kubectl rdma doctor --pkey)"
		}
		r.add("error", f.code, "transport retry counter exceeded (completion status 12, IBV_WC_RETRY_EXC_ERR): the peer's HCA never acknowledged; the peer died or hung first, the path between the ports is down, or (RoCE) packets are dropped: "+first, fix)
	case "IB_RNR_RETRY_EXCEEDED":
		r.add("error", f.code, "receiver-not-ready retry counter exceeded (completion status 13): the peer stopped posting receives, it is stuck or gone: "+first, fixPeerFirst)
	case "IB_LOCAL_PROTECTION":
		r.add("error", f.code, "local protection error (completion status 4, IBV_WC_LOC_PROT_ERR): the HCA could not access the registered buffer; with GPUDirect RDMA the GPU memory mapping is broken (nvidia-peermem or dma-buf) or PCIe ACS/IOMMU blocks peer-to-peer: "+first,
			"check nvidia-peermem is loaded and matches the GPU driver (or use dma-buf), PCIe ACS off and IOMMU in passthrough on the node; if NCCL_NET_GDR_LEVEL=LOC (no GPUDirect RDMA) makes the error go away, the GPU-NIC path is the cause")
	case "IB_REMOTE_ACCESS":
		r.add("error", f.code, "remote access error (completion status 10, IBV_WC_REM_ACCESS_ERR): the peer refused the access to its registered buffer: "+first,
			fixPeerFirst+"; check GPUDirect RDMA (nvidia-peermem, ACS/IOMMU) on the peer's node")
	case "IB_COMPLETION_ERROR":
		st, _ := strconv.Atoi(f.detail)
		name := wcStatus[st]
		if name == "" {
			name = "unknown status"
		}
		msg := fmt.Sprintf("IB completion error, status %d (%s): %s", st, name, first)
		if st == 5 {
			msg += "; a flush error follows an earlier error on the same queue pair"
		}
		r.add("error", f.code, msg, fixPeerFirst+"; look for the first NCCL WARN across all ranks and check the ports with ibv_devinfo")
	case "IB_MODIFY_QP":
		msg := "ibv_modify_qp failed: NCCL could not bring the queue pair up (" + f.detail + "): " + first
		low := strings.ToLower(f.detail)
		fix := fixGIDAndRoute
		switch {
		case strings.Contains(f.first, "next state INIT"):
			// RESET→INIT sets only the port and the PKey index
			msg += "; the RESET→INIT step sets the port and the PKey index (NCCL_IB_PKEY, default 0): the index names no entry of the port's PKey table"
			if v, ok := r.Env["NCCL_IB_PKEY"]; ok {
				msg += fmt.Sprintf(" (NCCL_IB_PKEY=%s)", v)
			}
			fix = fixPKeyIndex
		case strings.Contains(low, "timed out") || strings.Contains(low, "unreachable") || strings.Contains(low, "invalid argument"):
			msg += "; the remote GID is not reachable with the GID index in use, or the index names no usable GID"
		}
		r.add("error", f.code, msg, fix)
	case "IB_MEMLOCK":
		r.add("error", f.code, "RDMA memory registration failed with \"Cannot allocate memory\": the container's locked-memory limit is too low: "+first,
			"give the container the IPC_LOCK capability (securityContext.capabilities.add) and an unlimited memlock limit in the container runtime; kubectl rdma lint flags a missing IPC_LOCK")
	case "PEER_UNREACHABLE":
		r.add("error", f.code, "a rank could not reach or lost a peer over its sockets: "+first,
			fixPeerFirst+"; otherwise check the pods reach each other on the NCCL_SOCKET_IFNAME interface (NetworkPolicy, firewall, same subnet) and that every rank runs the same NCCL version")
	}
}
