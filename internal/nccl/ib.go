package nccl

// Findings that matter on InfiniBand: a GID index set for IB ports (NCCL
// ignores it there), NCCL_IB_HCA naming devices NCCL never opened, and
// NCCL_IB_PKEY given a PKey value where NCCL wants a PKey-table index.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmanet/rdmanet/internal/lint"
)

// pkeyTableMax is the size of an mlx5 port's PKey table: NCCL_IB_PKEY is
// an index into it (ibv_qp_attr.pkey_index), so no valid value reaches it.
const pkeyTableMax = 128

const fixPKeyIndex = "NCCL_IB_PKEY is the index of the partition in the port's PKey table, not the PKey: leave it unset (index 0, the port's first partition — on an rdmanet ib-sriov VF the network's own), or set the line number (from 0) of the PKey in `cat /sys/class/infiniband/<hca>/ports/1/pkeys/*`; kubectl rdma verify (ib-pkey) shows the pod's table"

func (r *Report) ibFindings() {
	r.gidIndexOnIB()
	r.hcaNotOpened()
	if v, ok := r.Env["NCCL_IB_PKEY"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64); err == nil && (n < 0 || n >= pkeyTableMax) {
			r.add("error", "IB_PKEY_INDEX", fmt.Sprintf("NCCL_IB_PKEY=%s (%#x) looks like a PKey value, but NCCL uses it as the index into the port's PKey table (%d entries): every queue pair fails at RESET→INIT (ibv_modify_qp, Invalid argument)", v, n, pkeyTableMax), fixPKeyIndex)
		}
	}
}

// ibRanks lists the ranks whose HCAs the log names all on an InfiniBand
// link layer; mixed tells whether other ranks' HCAs are on RoCE.
func (r *Report) ibRanks() (ib []Rank, mixed bool) {
	for _, rk := range r.Ranks {
		switch rk.LinkLayer {
		case "IB":
			ib = append(ib, rk)
		case "RoCE":
			mixed = true
		}
	}
	return ib, mixed
}

func (r *Report) gidIndexOnIB() {
	v, ok := r.Env["NCCL_IB_GID_INDEX"]
	ib, mixed := r.ibRanks()
	if !ok || len(ib) == 0 || mixed {
		return
	}
	r.add("info", "IB_GID_INDEX_IGNORED", fmt.Sprintf("NCCL_IB_GID_INDEX=%s is set, but NET/IB runs on InfiniBand ports (%s): IB addresses ports by LID and needs no GID index, so the setting is harmless and may be dropped; it matters on RoCE only", v, strings.Join(ib[0].HCAs, " ")), "")
}

// hcaNotOpened reports NCCL_IB_HCA entries that select none of the
// devices NCCL opened on the host that set them (NCCL_IB_HCA syntax as
// lint reads it: '=' exact, '^' excludes, prefixes otherwise, ':port').
func (r *Report) hcaNotOpened() {
	type hostView struct {
		filter string
		opened map[string]bool
		labels []string
	}
	hosts := map[string]*hostView{}
	for _, rk := range r.Ranks {
		h := hosts[rk.Host]
		if h == nil {
			h = &hostView{opened: map[string]bool{}}
			hosts[rk.Host] = h
		}
		if v, ok := rk.Env["NCCL_IB_HCA"]; ok && h.filter == "" {
			h.filter = strings.TrimSpace(v)
		}
		for _, hca := range rk.HCAs {
			dev, _, _ := strings.Cut(hca, ":")
			if !h.opened[dev] {
				h.opened[dev] = true
				h.labels = append(h.labels, hca)
			}
		}
	}
	byItem := map[string][]string{} // entry -> hosts
	opened := map[string][]string{} // host -> HCAs it opened
	var filters []string
	for host, h := range hosts {
		if h.filter == "" && len(hosts) == 1 {
			h.filter = strings.TrimSpace(r.Env["NCCL_IB_HCA"])
		}
		if h.filter == "" || strings.HasPrefix(h.filter, "^") || len(h.opened) == 0 {
			continue
		}
		prefix, list := "", h.filter
		if strings.HasPrefix(list, "=") {
			prefix, list = "=", list[1:]
		}
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			sel := false
			for dev := range h.opened {
				sel = sel || lint.FilterSelects(prefix+item, dev)
			}
			if !sel {
				byItem[item] = append(byItem[item], host)
				opened[host] = h.labels
				if !contains(filters, h.filter) {
					filters = append(filters, h.filter)
				}
			}
		}
	}
	if len(byItem) == 0 {
		return
	}
	var parts []string
	for _, item := range slices.Sorted(maps.Keys(byItem)) {
		hs := byItem[item]
		slices.Sort(hs)
		parts = append(parts, fmt.Sprintf("%s (on %s)", item, strings.Join(hs, ", ")))
	}
	var op []string
	for _, h := range slices.Sorted(maps.Keys(opened)) {
		op = append(op, h+": "+strings.Join(opened[h], " "))
	}
	r.add("warning", "IB_HCA_NOT_OPENED", fmt.Sprintf("NCCL_IB_HCA=%s names %s, which NCCL never opened (it opened %s): that device is not in the pod, or its port is down, so the rank runs on fewer HCAs than asked", strings.Join(filters, " | "), strings.Join(parts, ", "), strings.Join(op, "; ")),
		"name the devices the pod has (ls /sys/class/infiniband in the pod, kubectl rdma verify: nccl-ib-hca); an exclusive pod has its VF's device only, whose name differs per node — use a prefix (mlx5) or unset NCCL_IB_HCA")
}
