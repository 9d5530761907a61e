#!/usr/bin/env python3
"""Generates the NCCL log fixtures (synthetic runs in the format NCCL 2.x and
nccl-tests print). Re-run: python3 gen.py  (output is deterministic)."""
import random

random.seed(7)

def hosts():
    return [("face-trainer-0", "10.60.1.11", "mlx5_2"), ("face-trainer-1", "10.60.1.12", "mlx5_3")]

def ranks():
    # 2 pods x 2 GPUs, one process per GPU (mpirun -np 4, all_reduce_perf -g 1)
    out = []
    r = 0
    for h, ip, hca in hosts():
        for dev in range(2):
            pid = 41 + dev if h.endswith("0") else 37 + dev
            out.append(dict(host=h, ip=ip, hca=hca, dev=dev, pid=pid, tid=pid + 56, rank=r))
            r += 1
    return out

def p(rk, main=False):
    return "%s:%d:%d [%d]" % (rk["host"], rk["pid"], rk["pid"] if main else rk["tid"], rk["dev"])

def table(peak, lat, root_col=True, wrong=0):
    lines = []
    if root_col:
        lines.append("#                                                              out-of-place                       in-place          ")
        lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
        lines.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")
    else:
        lines.append("#                                                       out-of-place                       in-place          ")
        lines.append("#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error")
        lines.append("#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")
    bus = []
    size = 1 << 20
    while size <= 1 << 30:
        algpeak = peak / 1.5
        vals = []
        for _ in range(2):
            t = lat + size / (algpeak * 1e3) * random.uniform(1.0, 1.04)
            alg = size / t / 1e3
            vals.append((t, alg, alg * 1.5))
        bus += [vals[0][2], vals[1][2]]
        w = str(wrong if size == 1 << 30 else 0) if root_col else ("%.0e" % 0 if not wrong else "1e+00")
        if root_col:
            lines.append("%12d  %12d     float     sum      -1  %7.1f  %6.2f  %6.2f  %5s  %7.1f  %6.2f  %6.2f  %5s" % (
                size, size // 4, vals[0][0], vals[0][1], vals[0][2], w, vals[1][0], vals[1][1], vals[1][2], w))
        else:
            lines.append("%12d  %12d     float     sum  %7.1f  %6.2f  %6.2f  %5s  %7.1f  %6.2f  %6.2f  %5s" % (
                size, size // 4, vals[0][0], vals[0][1], vals[0][2], w, vals[1][0], vals[1][1], vals[1][2], w))
        size <<= 2
    lines.append("# Out of bounds values : %d %s" % (wrong, "OK" if not wrong else "FAILED"))
    lines.append("# Avg bus bandwidth    : %.4f " % (sum(bus) / len(bus)))
    lines.append("#")
    return lines

def header(rks, version_line=True):
    out = ["# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
           "#", "# Using devices"]
    for rk in rks:
        out.append("#  Rank %2d Group  0 Pid %6d on %s device  %d [0x%02x] NVIDIA H100 80GB HBM3" % (rk["rank"], rk["pid"], rk["host"], rk["dev"], 0x18 + rk["dev"] * 0x1c))
    out.append("#")
    return out

def init_lines(rk, kind, version="2.21.5+cuda12.4", gdr=True, env=None, old_channels=False, prefix=""):
    L = []
    m = p(rk, True)
    t = p(rk)
    L.append("%s NCCL INFO Bootstrap : Using net1:%s<0>" % (m, rk["ip"]))
    L.append("%s NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory" % m)
    L.append("%s NCCL INFO NET/Plugin : No plugin found, using internal implementation" % m)
    L.append("%s NCCL INFO cudaDriverVersion 12040" % m)
    if rk["rank"] == 0:
        L.append("NCCL version %s" % version)
    L.append("%s NCCL INFO NCCL_SOCKET_IFNAME set by environment to =net1" % t)
    for k, v in (env or {}).items():
        L.append("%s NCCL INFO %s set by environment to %s." % (t, k, v))
    if kind == "IB":
        L.append("%s NCCL INFO NET/IB : Using [0]%s:1/RoCE [RO]; OOB net1:%s<0>" % (t, rk["hca"], rk["ip"]))
        L.append("%s NCCL INFO Using non-device net plugin version 0" % t)
        L.append("%s NCCL INFO Using network IB" % t)
    else:
        if not env:
            L.append("%s NCCL INFO NET/IB : No device found." % t)
        L.append("%s NCCL INFO NET/Socket : Using [0]net1:%s<0>" % (t, rk["ip"]))
        L.append("%s NCCL INFO Using non-device net plugin version 0" % t)
        L.append("%s NCCL INFO Using network Socket" % t)
    comm = "0x%012x" % random.getrandbits(44)
    L.append("%s NCCL INFO comm %s rank %d nranks 4 cudaDev %d nvmlDev %d busId %x000 commId 0x5e3b9c07a41d2f68 - Init START" % (t, comm, rk["rank"], rk["dev"], rk["dev"], 0x18 + rk["dev"] * 0x1c))
    if kind == "IB":
        L.append("%s NCCL INFO NET/IB : GPU Direct RDMA %s for HCA 0 '%s'%s" % (t, "Enabled" if gdr else "Disabled", rk["hca"], "" if gdr else " (no module)"))
    peer = (rk["rank"] + 2) % 4
    local = rk["rank"] ^ 1
    suffix = "/GDRDMA" if (kind == "IB" and gdr) else ""
    for ch in range(2):
        if old_channels:
            L.append("%s NCCL INFO Channel %02d : %d[%x000] -> %d[%x000] [receive] via NET/%s/0%s" % (t, ch, peer, 0x18, rk["rank"], 0x18, kind, suffix))
            L.append("%s NCCL INFO Channel %02d : %d[%x000] -> %d[%x000] [send] via NET/%s/0%s" % (t, ch, rk["rank"], 0x18, peer, 0x18, kind, suffix))
        else:
            L.append("%s NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] [receive] via NET/%s/0%s" % (t, ch, peer, peer % 2, rk["rank"], rk["dev"], kind, suffix))
            L.append("%s NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC" % (t, ch, rk["rank"], rk["dev"], local, local % 2))
            L.append("%s NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/%s/0%s" % (t, ch, rk["rank"], rk["dev"], peer, peer % 2, kind, suffix))
    L.append("%s NCCL INFO Connected all rings" % t)
    L.append("%s NCCL INFO comm %s rank %d nranks 4 cudaDev %d nvmlDev %d busId %x000 commId 0x5e3b9c07a41d2f68 - Init COMPLETE" % (t, comm, rk["rank"], rk["dev"], rk["dev"], 0x18 + rk["dev"] * 0x1c))
    return [prefix + l for l in L]

def interleave(blocks):
    out = []
    idx = [0] * len(blocks)
    while any(idx[i] < len(b) for i, b in enumerate(blocks)):
        i = random.randrange(len(blocks))
        if idx[i] < len(blocks[i]):
            out.append(blocks[i][idx[i]])
            idx[i] += 1
    return out

def write(name, lines):
    with open(name, "w") as f:
        f.write("\n".join(lines) + "\n")

rks = ranks()
# IB + GPUDirect RDMA (mpirun, plain output)
write("ib_gdr.log", header(rks) + interleave([init_lines(r, "IB") for r in rks]) + table(22.8, 28.0))
# IB without GDR (older NCCL channel format and the older 12-column nccl-tests table)
write("ib_nogdr.log", header(rks) + interleave([init_lines(r, "IB", version="2.18.3+cuda12.2", gdr=False, old_channels=True) for r in rks]) + table(17.9, 31.0, root_col=False))
# Silent socket fallback: no RDMA device in the pods
write("socket_fallback.log", header(rks) + interleave([init_lines(r, "Socket") for r in rks]) + table(2.6, 95.0))
# Deliberate socket baseline (NCCL_IB_DISABLE=1), OpenMPI --tag-output prefixes
write("socket_baseline.log", ["[1,%d]<stdout>:%s" % (0, l) for l in header(rks)] +
      ["[1,%d]<stdout>:%s" % (i % 4, l) for i, l in enumerate(interleave([init_lines(r, "Socket", env={"NCCL_IB_DISABLE": "1"}) for r in rks]))] +
      ["[1,0]<stdout>:%s" % l for l in table(2.7, 93.0)])
# Mixed: pod face-trainer-1 got no RDMA device; kubectl logs --prefix from both pods
blocks = []
for r in rks:
    kind = "IB" if r["host"].endswith("0") else "Socket"
    blocks.append(init_lines(r, kind, prefix="[pod/%s/trainer] " % r["host"]))
write("mixed_ranks.log", interleave(blocks))
