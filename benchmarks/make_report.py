#!/usr/bin/env python3
"""Writes docs/PERFORMANCE.md from the outputs of scripts/bench.sh (JSON lines + text)."""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
import doc_sections  # noqa: E402
import gpu_report  # noqa: E402
import kernels_report  # noqa: E402
import vs_pytorch_report  # noqa: E402


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout
    except Exception:  # noqa: BLE001 - best effort machine description
        return ""


def load(path):
    rows = []
    for f in sorted(glob.glob(path)):
        with open(f) as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    return rows


def text(res, name):
    p = os.path.join(res, name)
    return open(p).read().rstrip() if os.path.exists(p) else ""


def human_bytes(b):
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b} B"


class Targets:
    """Collects every figure compared with a target; formats status cells and missed lines."""

    def __init__(self):
        self.missed = []
        self.count = 0

    def le(self, what, value, target, unit="", why=""):
        self.count += 1
        if value is None:
            return "n/a"
        if value <= target:
            return "met"
        pct = (value / target - 1) * 100
        self.missed.append((what, f"{value:.3g}{unit} vs target <= {target:g}{unit}", pct, why))
        return f"**missed by {pct:.0f}%**"

    def ge(self, what, value, target, unit="", why=""):
        self.count += 1
        if value is None:
            return "n/a"
        if value >= target:
            return "met"
        pct = (1 - value / target) * 100
        self.missed.append((what, f"{value:.3g}{unit} vs target >= {target:g}{unit}", pct, why))
        return f"**missed by {pct:.0f}%**"


def machine_tag(res):
    """One line naming the CPU and the GEMM kernel, placed under every section heading."""
    gemm = kernels_report.gemm_line(res)
    core = re.search(r"core (\S+) \(chosen by (.*)\), \d+ threads?", gemm)
    kernel = f"OpenBLAS core {core.group(1)} (chosen by {core.group(2)})" if core else gemm
    return f"_CPU: {kernels_report.cpu_line()}; GEMM: {kernel}._"


def machine(args):
    mem = re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read())
    cxx = ""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cache = os.path.join(root, args.build_dir, "CMakeCache.txt")
    if os.path.exists(cache):
        m = re.search(r"CMAKE_CXX_COMPILER:\w+=(.*)", open(cache).read())
        if m:
            cxx = sh(f"{m.group(1)} --version").splitlines()[0]
    mpi = (sh("mpirun --version") or "").splitlines()
    blas = sh("dpkg -l 'libopenblas*' 2>/dev/null | awk '/^ii/ {print $2\" \"$3; exit}'").strip()
    load1 = float(args.load_before.split()[0])
    load2 = float(args.load_after.split()[0])
    lines = [
        f"- Date: {args.date or datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {kernels_report.cpu_line()}",
        f"- GEMM: {kernels_report.gemm_line(args.results)}",
        f"- Memory: {int(mem.group(1)) / (1 << 20):.0f} GiB" if mem else "- Memory: ?",
        f"- Compiler: {cxx or '?'} (Release, -DDTENSOR_CUDA=OFF)",
        f"- MPI: {mpi[0] if mpi else '?'}; OpenBLAS: {blas or '?'} (OPENBLAS_NUM_THREADS=1)",
        f"- Kernel: {platform.release()}",
        f"- Load average (1, 5, 15 min) before: {args.load_before}; after: {args.load_after}"
        f" ({args.seconds} s of benchmarks)",
    ]
    # Whether other work shared the machine shows in the load before the run (above 1: rerun);
    # the load after it is the benchmarks' own (the multi-rank runs keep every core busy).
    loaded = load1 > 1.0
    if loaded:
        lines.append(
            f"\n**These figures were taken on a loaded machine** (1-minute load average "
            f"{load1:.2f} before the run on {os.cpu_count()} cores: other jobs were running): absolute "
            "times are noisy and inflated, ratios against a baseline measured in the same run "
            "are the meaningful figures, and multi-rank runs are oversubscribed.")
    else:
        lines.append(
            f"\nQuiet machine (1-minute load average {load1:.2f} before the run; the load after "
            "it is the benchmarks' own). Runs with more ranks than cores are oversubscribed.")
    return "\n".join(lines)


# Hand-written notes below the dispatch callgrind table (e.g. the paired before/after counts of
# issue 41's dispatch-regression paragraph): no benchmark of scripts/bench.sh measures them, so
# they lie between these markers and are carried over unchanged, below the regenerated table.
DISPATCH_NOTES_BEGIN = "<!-- dispatch-notes:begin"
DISPATCH_NOTES_END = "<!-- dispatch-notes:end -->"


def dispatch_section(res, tg, notes=""):
    """The dispatch tables; `notes` (the kept marked block, or "") goes below the callgrind
    table."""
    rows = load(os.path.join(res, "bench_dispatch.jsonl"))
    out = ["## Dispatch", ""]
    if not rows:
        return out + ["(bench_dispatch produced no results)", ""] + ([notes, ""] if notes else [])
    out += [
        "A DTensor op whose sharding is in the propagation cache vs the same op on the local "
        "tensors, [8, 8] float32 on a 1-rank mesh (single process; no input needs a "
        "redistribution, so no collective is involved). Per-call median over batches "
        "of calls; overhead = DTensor - local. Miss = propagation cache cleared before every call "
        "(miss+plan: the redistribute plan cache cleared too); the miss figure is the whole call "
        "minus the time of the clear.",
        "",
        "| op | local µs | cache-hit µs (p10-p90) | overhead µs | target | miss µs | miss+plan µs "
        "| target | check |",
        "|---|---:|---:|---:|---|---:|---:|---|---|",
    ]
    counts = {}  # op -> {mode: instructions per call}
    for line in text(res, "callgrind.txt").splitlines():
        parts = line.split()
        if len(parts) == 3:
            counts.setdefault(parts[0], {})[parts[1]] = int(parts[2])

    def cg_why(name):
        op = name.split("(")[0]
        c = counts.get(op, {})
        if "dtensor" in c and "local" in c:
            return (f"callgrind counts {c['dtensor'] - c['local']:,} instructions of DTensor "
                    f"layer per cache-hit `{op}` (table below): compare with the time to judge "
                    "how much of it is machine load")
        return ""

    recorded = [r for r in rows if r["name"].startswith("record ")]
    rows = [r for r in rows if not r["name"].startswith("record ")]
    for r in rows:
        s_hit = tg.le(f"dispatch overhead of {r['name']}", r["overhead_us"], 5.0, " µs",
                      why=cg_why(r["name"]))
        s_miss = tg.le(f"cache miss of {r['name']}", r["miss_us"], 100.0, " µs")
        check = "ok" if r["correct"] and r["all_hits"] else (
            "result differs" if not r["correct"] else "not all hits")
        out.append(
            f"| `{r['name']}` | {r['baseline_median_us']:.2f} | {r['median_us']:.2f} "
            f"({r['p10_us']:.2f}-{r['p90_us']:.2f}) | {r['overhead_us']:.2f} | ≤ 5 µs: {s_hit} "
            f"| {r['miss_us']:.1f} | {r['miss_with_plan_us']:.1f} | ≤ 100 µs: {s_miss} | {check} |")
    out.append("")
    if counts:
        out += [
            "Instructions per cache-hit call (callgrind, instrumentation on only around the loop; "
            "(I(4000 calls) - I(2000 calls)) / 2000; glibc's malloc/free internals left out, here "
            "and in the recording table: they vary by hundreds a call with the heap's layout, "
            "results/callgrind_detail.txt keeps them):",
            "",
            "| op | DTensor call | local op | DTensor layer |",
            "|---|---:|---:|---:|",
        ]
        for op, c in counts.items():
            if op.startswith("record-"):
                continue  # in the recording table
            d, l = c.get("dtensor"), c.get("local")
            layer = f"{d - l:,}" if d is not None and l is not None else "?"
            fmt = lambda v: f"{v:,}" if v is not None else "?"  # noqa: E731
            out.append(f"| `{op}` | {fmt(d)} | {fmt(l)} | {layer} |")
    else:
        out.append("Callgrind count: not run (CALLGRIND=0 or valgrind missing).")
    out.append("")
    if notes:
        out += [notes, ""]
    if recorded:
        out += [
            "### Autograd recording",
            "",
            "The same cache-hit calls on inputs that require grad (one backward node recorded per "
            "call, freed with its output) vs the same inputs without; a graph kept alive holds "
            "the leaves' gradient accumulators, as in training. Fastest median of three "
            "alternating rounds each.",
            "",
            "| op | not recorded µs | recorded µs | recording µs | target | instructions |",
            "|---|---:|---:|---:|---|---:|",
        ]
        for r in recorded:
            op = r["name"][len("record "):]
            c = counts.get("record-" + op.split("(")[0], {})
            instr = (f"{c['dtensor'] - c['local']:,}" if "dtensor" in c and "local" in c
                     else "")
            st = tg.le(f"autograd recording of {op}", r["overhead_us"], 0.5, " µs",
                       why=(f"callgrind counts {instr} instructions of recording per call "
                            "(for mm, 2026-11-26, callgrind: about 30% building the node in "
                            "record(), 15% malloc/free, 15% freeing the node with its output, "
                            "10% its spec and edge lists, 10% the output's autograd state and "
                            "the leaf's accumulator, 7% keeping the kernel's inputs to save, the "
                            "rest in reference counts and the dispatch glue); "
                            "the not-recorded column moves with the machine's speed "
                            "as much, so compare the two columns with an earlier run"
                            if instr else "not counted under callgrind (CALLGRIND_OPS)"))
            out.append(f"| `{op}` | {r['baseline_median_us']:.2f} | {r['median_us']:.2f} | "
                       f"{r['overhead_us']:.2f} | ≤ 0.5 µs: {st} | {instr} |")
        out.append("")
    return out


def cache_section(res, tg):
    rows = load(os.path.join(res, "bench_cache.jsonl"))
    out = ["## Propagation cache", ""]
    if not rows:
        return out + ["(bench_cache produced no results)", ""]
    r = rows[0]
    st = tg.ge("propagation cache hit rate after step 1", r["hit_rate_after_step1"] * 100, 100.0,
               "%")
    out += [
        f"A training-like loop of {r['steps']} steps, {r['ops_per_step']} DTensor ops per step "
        "(mm, add, softmax, mul, div by a scalar that changes every step, view, transpose, "
        f"sum over a dim, sum), {r['ranks']} rank(s).",
        "",
        "| phase | hits | misses | hit rate | target |",
        "|---|---:|---:|---:|---|",
        f"| step 1 | {r['step1_hits']} | {r['step1_misses']} | | |",
        f"| steps 2..{r['steps']} | {r['hits_after_step1']} | {r['misses_after_step1']} | "
        f"{r['hit_rate_after_step1'] * 100:.2f}% | 100%: {st} |",
        "",
        f"Cache entries at the end: {r['entries']}.",
        "",
    ]
    return out


# name -> (ratio target, smallest size it applies to). The 2-D rows move both mesh dims with
# one collective over the flattened mesh (issue: within 1.1x of one world collective, 1-16 MB).
REDIST_TARGETS = {
    "S(0)->R": (0.95, 16 << 20),
    "P->R": (0.95, 16 << 20),
    # Issue 21's table: S(1)->R within 1.1x of the raw MPI_Allgather from 1 MB.
    "S(1)->R": (0.91, 1 << 20),
    "2d [S(0),S(1)]->[R,R]": (0.91, 1 << 20),
    "2d [P,P]->[R,R]": (0.91, 1 << 20),
    # Shard -> Shard: the raw baseline sends contiguous blocks, where the redistribute must also
    # change the layout (each piece is a column block of a row block): an allowance for the
    # strided pieces, which issue 21 does not set a figure for.
    "S(0)->S(1)": (0.8, 16 << 20),
    "2d [S(0),S(0)]->[S(1),S(1)]": (0.8, 16 << 20),
}

BACKEND_NOTE = (
    "**Backend note.** Where a why line points here, the same collective issued through "
    "dtensor's Communicator alone (no DTensor) is about as slow as the DTensor call, so the "
    "gap is in the MPI backend, not in the DTensor layer. The backend runs the blocking MPI "
    "call (dtensor/collectives/mpi/mpi_communicator.h), the same as the raw column, after the "
    "consistency check's fingerprint exchange (one blocking MPI_Allgather of 256 bytes per "
    "rank, dtensor/collectives/communicator.h): a second synchronisation of the ranks, which on 4 ranks "
    "oversubscribed on 2 cores costs tens of µs to a few hundred (see 'Collective consistency "
    "check'). `DTENSOR_CHECK_COLLECTIVES=0` removes it.")
BACKEND_WHY = "the gap is in the backend, not the DTensor layer (see the backend note)"


def redist_why(r):
    comm, raw, dt = r.get("comm_median_us"), r["baseline_median_us"], r["median_us"]
    nb = r.get("raw_nonblocking_median_us")
    if comm is None:
        return ""
    nb_txt = (f", the nonblocking MPI call finished by MPI_Wait {nb:.0f} µs"
              if nb is not None else "")
    if comm >= 0.8 * dt:
        return (f"the same collective through dtensor's Communicator alone takes {comm:.0f} µs "
                f"(raw MPI {raw:.0f} µs{nb_txt}; DTensor {dt:.0f} µs): {BACKEND_WHY}")
    head = (f"the Communicator alone takes {comm:.0f} µs vs DTensor {dt:.0f} µs (raw MPI "
            f"{raw:.0f} µs{nb_txt}): the DTensor layer adds the rest: ")
    if str(r.get("name", "")).startswith("S(1)->R"):
        return head + ("each rank's piece is a column block of the result, so it cannot land "
                       "contiguously: from 256 KB it is gathered straight into place (one "
                       "subarray datatype per piece, MPI_Alltoallw: Open MPI unpacks the "
                       "strided pieces through its datatype engine), below, a contiguous gather "
                       "(the Communicator column) plus one unpacking copy into the fresh "
                       "result; the section 'Gather along a non-leading dim' measures both "
                       "forms against the raw call, and the 2-D [S(0),S(1)]->[R,R] line gives "
                       "the perf profile of the same placement (98% inside MPI_Alltoallw)")
    if str(r.get("name", "")).startswith("2d [S") and str(r.get("name", "")).endswith("[R,R]"):
        return head + ("each rank's piece is a column block of a row block of the result, so it "
                       "cannot land contiguously: from 256 KB it is gathered straight into "
                       "place (one subarray datatype per piece, MPI_Alltoallw: Open MPI packs "
                       "and unpacks the strided pieces through its datatype engine), below, a "
                       "contiguous gather (the Communicator column) plus one unpacking copy "
                       "into the fresh result; S(1)->R pays the same; perf on rank 1 (16 MB, "
                       "40 iterations, 2026-11-26) puts 98% of the DTensor call's samples "
                       "inside MPI_Alltoallw, so the gap to the contiguous MPI_Allgather is "
                       "Open MPI's strided placement, not the DTensor layer")
    if "]->[S" in str(r.get("name", "")) or str(r.get("name", "")).startswith("S(0)->S"):
        return head + ("the piece for each peer is a column block of this rank's rows: MPI "
                       "reads it through a subarray datatype (MPI_Alltoallw, "
                       "Communicator::all_to_all_regions) into its shared-memory fragments, "
                       "where the raw call sends contiguous blocks (and so does not make the "
                       "layout change the redistribute makes); perf on rank 1 (S(0)->S(1) at "
                       "16 MB, 40 iterations, 2026-11-26) puts 95% of the DTensor call's "
                       "samples inside MPI_Alltoallw (Open MPI's basic linear alltoallw, "
                       "packing through opal_generic_simple_pack), so the DTensor layer itself "
                       "adds about 5%; packing the pieces ourselves (one row copy each) and "
                       "sending them with a contiguous MPI_Alltoall measured slower (a one-off "
                       "MPI program, 4 ranks, [2048, 2048] float32, 3 rounds, 2026-11-27: "
                       "1.61-1.86 ms against MPI_Alltoallw's 1.22-1.48 ms; [16384, 256]: "
                       "4.06-4.76 against 3.85-4.88 ms): the layout change itself costs the "
                       "gap on 2 shared cores")
    name = str(r.get("name", ""))
    if name.startswith("P->") or name.startswith("2d [P"):
        return head + ("the DTensor result goes to a newly allocated output (from the "
                       "allocator's large-block cache, dtensor/tensor/memory_stats.h, so without "
                       "first-touch page faults after the first iteration): the input, which "
                       "the caller keeps, is copied into it and reduced there in place (Open "
                       "MPI's in-place all-reduce is the faster form), where the Communicator "
                       "row reduces the same warm buffer in place with no copy; a source the "
                       "caller gives up (std::move, a layer's output) is reduced in its own "
                       "memory with no copy")
    return head + ("a gather whose pieces cannot be placed directly (below "
                   "kGatherIntoDimMinBytes) lands as [n, ...] blocks that the executor copies "
                   "into the output (one copy; the allocator's large-block cache spares the page faults); "
                   "on this 2-core machine part of it is noise")


def redistribute_section(res, tg):
    rows = load(os.path.join(res, "bench_redistribute.jsonl"))
    out = ["## Redistribute", ""]
    if not rows:
        return out + ["(bench_redistribute produced no results)", ""]
    out += [
        f"`DTensor::redistribute` vs the raw MPI collective on the same communicator (the mesh "
        f"dim's `MPI_Comm`, or `MPI_COMM_WORLD` for the 2-D cases that move over both dims), "
        f"{rows[0]['ranks']} ranks, float32. Time = median over iterations of the max over "
        "ranks (barrier before each iteration); ratio = raw time / DTensor time (1.0 = as fast "
        "as raw MPI); bus bandwidth as in nccl-tests (all-reduce algbw x 2(n-1)/n, all-gather / "
        "reduce-scatter / all-to-all algbw x (n-1)/n; size = global tensor, all-to-all: "
        "per-rank buffer). Raw MPI = the blocking call, which is what the backend issues; raw "
        "nonblocking = the MPI_I* form finished by MPI_Wait, for comparison. Communicator = the same collective through dtensor's Communicator "
        "(the backend redistribute uses) on preallocated tensors, which separates the backend's "
        "cost from the DTensor layer's. Every size is checked against an independently built "
        "expectation. "
        "Targets at >= 16 MB: S(0)->R and P->R ratio >= 0.95, S(0)->S(1) and the 2-D "
        "[S(0),S(0)]->[S(1),S(1)] (one all-to-all over the flattened mesh) >= 0.8 (their pieces "
        "are strided, the raw call's are not); from 1 MB: S(1)->R and the "
        "2-D [S(0),S(1)]->[R,R] and [P,P]->[R,R], which move both mesh dims with one collective "
        "over the flattened mesh, >= 0.91 (within 1.1x of one world collective, issue 21).",
        "",
    ]
    names = []
    for r in rows:
        if r["name"] not in names:
            names.append(r["name"])
    for name in names:
        rs = [r for r in rows if r["name"] == name]
        base = rs[0]["baseline"]
        out += [f"### {name} ({rs[0]['mesh']}; baseline {base})", ""]
        if base == "-":
            out += ["| size | DTensor µs (p10-p90) | check |", "|---:|---:|---|"]
            for r in rs:
                out.append(f"| {human_bytes(r['bytes'])} | {r['median_us']:.1f} "
                           f"({r['p10_us']:.1f}-{r['p90_us']:.1f}) | "
                           f"{'ok' if r['correct'] else 'WRONG'} |")
            out += ["", "Local chunking only (no communication, no baseline).", ""]
            continue
        out += ["| size | DTensor µs (p10-p90) | raw MPI µs | raw nonblocking µs | Communicator µs "
                "| ratio vs raw | ratio vs Communicator | busbw GB/s | raw busbw GB/s | target "
                "| check |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for r in rs:
            tgt = ""
            if name in REDIST_TARGETS and r["bytes"] >= REDIST_TARGETS[name][1]:
                t = REDIST_TARGETS[name][0]
                tgt = f"≥ {t}: " + tg.ge(f"redistribute {name} at {human_bytes(r['bytes'])}",
                                          r["ratio_vs_baseline"], t, why=redist_why(r))
            out.append(
                f"| {human_bytes(r['bytes'])} | {r['median_us']:.1f} ({r['p10_us']:.1f}-"
                f"{r['p90_us']:.1f}) | {r['baseline_median_us']:.1f} | "
                f"{r.get('raw_nonblocking_median_us', float('nan')):.1f} | "
                f"{r.get('comm_median_us', float('nan')):.1f} | "
                f"{r['ratio_vs_baseline']:.3f} | {r.get('ratio_vs_comm', float('nan')):.3f} | "
                f"{r['busbw_GBps']:.3f} | "
                f"{r['baseline_busbw_GBps']:.3f} | {tgt} | {'ok' if r['correct'] else 'WRONG'} |")
        out.append("")
    return out


def tp_section(res, tg):
    rows = load(os.path.join(res, "bench_tp_np*.jsonl"))
    out = ["## Tensor-parallel transformer block", ""]
    if not rows:
        return out + ["(bench_tp produced no results)", ""]
    r0 = rows[0]
    out += [
        f"One `nn::TransformerBlock` forward (RMSNorm, causal multi-head attention, SwiGLU MLP), "
        f"float32, dim={r0['dim']} heads={r0['heads']} seq={r0['seq']} batch={r0['batch']}, "
        "Megatron plan (colwise wq/wk/wv/w1/w3, rowwise wo/w2). Single device = the unsharded "
        "block on rank 0 alone; hand-written = the same math on the same weight shards with "
        "local ops (linear, matmul, softmax, rms_norm) and one `MPI_Allreduce` after attention "
        "and one after the MLP, no DTensor; hand + Communicator = the same with dtensor's "
        "Communicator::all_reduce instead of MPI_Allreduce (isolates the backend); DTensor "
        "no-grad = the DTensor block under NoGradGuard (its parameters require grad, so the "
        "DTensor column records the autograd graph and keeps what backward needs, which the "
        "hand-written block does not). Median (max over ranks) of "
        f"{r0['iters']} iterations. Target: DTensor within 1.05x of hand-written.",
        "",
        "| ranks | single-device ms | DTensor ms (p10-p90) | hand-written ms | hand + "
        "Communicator ms | DTensor no-grad ms | DTensor / hand | no-grad / hand | target | "
        "speed-up vs single | max abs diff vs hand |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: r["ranks"]):
        hc = r.get("hand_comm_median_us", float("nan"))
        ng = r.get("nograd_median_us", float("nan"))
        ng_ratio = r.get("ratio_nograd_vs_baseline", float("nan"))
        why = ""
        if hc == hc and r["ranks"] > 1:
            if hc >= r["baseline_median_us"] + 0.5 * (r["median_us"] - r["baseline_median_us"]):
                why = (f"the hand-written block with dtensor's Communicator all-reduce instead of "
                       f"MPI_Allreduce takes {hc / 1e3:.1f} ms (vs {r['baseline_median_us'] / 1e3:.1f}"
                       f" ms with MPI_Allreduce, DTensor {r['median_us'] / 1e3:.1f} ms): "
                       f"{BACKEND_WHY}")
            else:
                why = (f"with dtensor's Communicator the hand-written block takes {hc / 1e3:.1f} ms "
                       f"vs DTensor {r['median_us'] / 1e3:.1f} ms: the DTensor layer itself "
                       "costs the rest")
                if ng == ng:
                    why += (f"; without autograd recording (NoGradGuard) DTensor takes "
                            f"{ng / 1e3:.2f} ms ({ng_ratio:.3f}x hand-written), so recording "
                            "the graph and keeping its saved activations (which the "
                            "hand-written block does not do) accounts for "
                            f"{max(0.0, r['median_us'] - ng) / 1e3:.2f} ms and dispatch, "
                            "hooks and redistributes for the rest: perf on rank 1 of 4 "
                            "(`bench_tp --profile dtensor` vs `--profile hand_comm`, 300 "
                            "forwards, 2026-11-26) puts 2.3% of the DTensor block's samples in "
                            "the DTensor layer's own code (dispatch, propagation, autograd, "
                            "hooks; no function above 0.2%) and 2.4% more than the hand-written "
                            "block in libc (allocation, zeroing), with the same kernels in both")
        if r["ranks"] == 1:
            why = ("no collective at 1 rank; callgrind (`bench_tp --profile dtensor|hand`, 3 "
                   "forwards) counts the same instructions for both within 0.1% (1.101e9 vs "
                   "1.100e9, the GEMMs 79%), so the time difference is memory behaviour (the "
                   "DTensor block allocates its intermediates fresh) or noise, not dispatch "
                   "work; quiet standalone runs measured 1.07")
        if r["ranks"] > (os.cpu_count() or 1):
            why = (why + "; " if why else "") + (
                f"{r['ranks']} ranks share {os.cpu_count()} cores (oversubscribed)")
        st = tg.le(f"TP block DTensor / hand-written at {r['ranks']} rank(s)",
                   r["ratio_vs_baseline"], 1.05, "x", why=why)
        out.append(
            f"| {r['ranks']} | {r['single_median_us'] / 1e3:.2f} | {r['median_us'] / 1e3:.2f} "
            f"({r['p10_us'] / 1e3:.2f}-{r['p90_us'] / 1e3:.2f}) | "
            f"{r['baseline_median_us'] / 1e3:.2f} | {hc / 1e3:.2f} | {ng / 1e3:.2f} | "
            f"{r['ratio_vs_baseline']:.3f} | {ng_ratio:.3f} | ≤ 1.05: {st} | "
            f"{r['speedup_vs_single']:.2f} | {r['max_abs_diff_vs_hand']:.2g} |")
    colls = sorted({(r["ranks"], r.get("collectives", "")) for r in rows})
    out += [""] + [f"Collectives in one DTensor forward at {n} rank(s) (CommDebugMode): "
                   f"{c or 'none'}." for n, c in colls]
    out += ["", "With more ranks than cores (this machine) the ranks share cores, so the "
            "speed-up over a single device is not expected here; the DTensor / hand-written "
            "ratio is the figure that isolates the DTensor overhead.", ""]
    return out


def train_section(res, tg):
    rows = load(os.path.join(res, "bench_train_np*.jsonl"))
    out = ["## Training step", ""]
    if not rows:
        return out + ["(bench_train produced no results)", ""]
    r0 = rows[0]
    out += [
        f"One training step (forward, backward, SGD) of {r0['layers']} residual MLP blocks "
        f"(x + fc2(silu(fc1(x))), dim {r0['dim']}, hidden {r0['hidden']}) on {r0['tokens']} "
        "tokens, float32, fc1 colwise and fc2 rowwise (`parallelize_module`), loss = "
        "sum(y * w) / numel. Single device = the unsharded model on rank 0 alone; hand-written "
        "= the same step on the same weight shards with local ops, one `MPI_Allreduce` per "
        "block forward and one backward, gradients written out by hand, no DTensor. The "
        "weights of both are compared after the run. Median (max over ranks), variants "
        "interleaved in a shuffled order. Target: DTensor within 1.05x of hand-written.",
        "",
        "| ranks | single-device ms | DTensor ms (p10-p90) | hand-written ms | DTensor / hand "
        "| target | weights max abs diff |",
        "|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in sorted(rows, key=lambda r: r["ranks"]):
        why = ""
        if r["ranks"] > (os.cpu_count() or 1):
            why = f"{r['ranks']} ranks share {os.cpu_count()} cores (oversubscribed)"
        st = tg.le(f"training step DTensor / hand-written at {r['ranks']} rank(s)",
                   r["ratio_vs_baseline"], 1.05, "x", why=why)
        out.append(
            f"| {r['ranks']} | {r['single_median_us'] / 1e3:.2f} | {r['median_us'] / 1e3:.2f} "
            f"({r['p10_us'] / 1e3:.2f}-{r['p90_us'] / 1e3:.2f}) | "
            f"{r['baseline_median_us'] / 1e3:.2f} | {r['ratio_vs_baseline']:.3f} | "
            f"≤ 1.05: {st} | {r['max_weight_diff']:.2g} |")
    out.append("")
    return out


def compile_section(res, tg):
    rows = load(os.path.join(res, "bench_compile_np*.jsonl"))
    out = ["## Compiled step", ""]
    if not rows:
        return out + ["(bench_compile produced no results)", ""]
    r0 = rows[0]
    out += [
        "train_tp_transformer's tensor-parallel transformer (the second example; RMSNorm, SwiGLU, AdamW, loss parallel; "
        f"dim {r0['dim']}, {r0['layers']} layers) trained by its eager step and by "
        "`dtensor::compile`'s replay of the same step (`bench_compile`), interleaved; median "
        "(max over ranks). Kernel time = the time replay spends inside its nodes' computations "
        "alone (kernels and collectives, the allocation of their outputs: the same kernels the "
        "eager step runs on the same shards), measured on the replays themselves; framework "
        "time = step - kernel time (for the eager step: dispatch, propagation, autograd "
        "recording, hooks, and allocating and freeing; for replay: the graph walk and giving "
        "up values at their last reader, whose part is the frees column). Replay takes the "
        "memory of the values it makes from one arena at offsets planned from its first two "
        "replays (the memory plan), so from the third replay on it neither frees nor allocates "
        "them: "
        "freeing was most of replay's own time (glibc returning the heap's top to the system, "
        "then faulting the pages in again). The kernel time, used for both sides, is replay's, "
        "which no longer pays those page faults; eager's count as eager framework time, which "
        "is why the eager framework column rose with the pool (0.14 / 0.43 / 1.14 ms at 1/2/4 "
        "ranks before it). Eager - replay is the "
        "difference of the median steps, which depends on no accounting. Both models' parameters "
        "are compared bit for bit after the run. Target: replay removes >= 90% of the framework "
        "time. Scheduled = replay with `schedule_collectives` (each collective issued as early as "
        "its input is ready, on the communication thread, waited on before its first reader).",
        "",
        "| ranks | eager ms (p10-p90) | replay ms (p10-p90) | scheduled ms | kernel ms "
        "| framework eager ms | framework replay ms | of which frees ms | removed | target "
        "| eager - replay ms | collectives per step (without dedup) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: r["ranks"]):
        fe, fr = r["framework_eager_seconds"], r["framework_replay_seconds"]
        removed = 1 - fr / fe if fe > 0 else None
        # The measured why: what replay's framework time is made of, from the row itself.
        free = r["free_seconds"]
        why = (f"freeing the step's values at their last reader is {free * 1e3:.2f} ms of "
               f"replay's {fr * 1e3:.2f} ms framework time (the eager step frees the same values, "
               f"so it is in the eager framework time too)")
        if r.get("nodes", 0) > 0:
            why += (f"; the walk itself takes {(fr - free) / r['nodes'] * 1e6:.2f} µs per node "
                    f"of the graph ({r['nodes']} nodes)")
        if r["ranks"] > (os.cpu_count() or 1):
            why += f"; {r['ranks']} ranks share {os.cpu_count()} cores (oversubscribed)"
        st = tg.ge(f"compiled step: framework time removed at {r['ranks']} rank(s)", removed, 0.9,
                   why=why)
        out.append(
            f"| {r['ranks']} | {r['eager_median_us'] / 1e3:.2f} "
            f"({r['eager_p10_us'] / 1e3:.2f}-{r['eager_p90_us'] / 1e3:.2f}) | "
            f"{r['replay_median_us'] / 1e3:.2f} "
            f"({r['replay_p10_us'] / 1e3:.2f}-{r['replay_p90_us'] / 1e3:.2f}) | "
            f"{r['scheduled_median_us'] / 1e3:.2f} | "
            f"{r['kernel_seconds'] * 1e3:.2f} | {fe * 1e3:.2f} | {fr * 1e3:.2f} | "
            f"{r['free_seconds'] * 1e3:.2f} | "
            f"{'n/a' if removed is None else f'{removed * 100:.0f}%'} | ≥ 90%: {st} | "
            f"{r['eager_minus_replay_seconds'] * 1e3:.2f} | "
            f"{r['collectives']} ({r['collectives_no_dedup']}) |")
    out.append("")
    mem = [r for r in sorted(rows, key=lambda r: r["ranks"]) if r.get("eager_peak_bytes", 0) > 0]
    if mem:
        out += [
            "Memory (rank 0): the step's peak of held bytes beyond those held before it, eager vs "
            "replay (the replay's arena, the memory plan's static offset plan, counts as held "
            "during the replay), and what the graph keeps between replays (the arena but for the "
            "gradients in it, counted as cached). Target: replay peak <= eager peak "
            "(issue 42 item 7).",
            "",
            "| ranks | eager peak MB | replay peak MB | replay / eager | target | kept between replays MB |",
            "|---:|---:|---:|---:|---|---:|",
        ]
        for r in mem:
            ratio = r["replay_peak_bytes"] / r["eager_peak_bytes"]
            st = tg.le(f"compiled step: replay peak / eager peak at {r['ranks']} rank(s)", ratio, 1.0,
                       unit="x")
            out.append(f"| {r['ranks']} | {r['eager_peak_bytes'] / 1e6:.3f} | "
                       f"{r['replay_peak_bytes'] / 1e6:.3f} | {ratio:.3f} | <= 1: {st} | "
                       f"{r['kept_bytes'] / 1e6:.3f} |")
        out.append("")
    out += [
        "On a GPU, replay as one CUDA graph (`CompileOptions::cuda_graph`, issue 42 item 6): eager vs replay vs CUDA-graph replay of the main example's model on one rank (`bench_compile_cuda_graph`, run by scripts/bench_gpu.sh's gpu_figures into compile_cuda_graph.jsonl): pending a GPU session, no figures yet.",
        "",
    ]
    return out


def checkpoint_section(res, tg):
    rows = load(os.path.join(res, "bench_checkpoint_np*.jsonl"))
    out = ["## Checkpoint save and load", ""]
    if not rows:
        return out + ["(bench_checkpoint produced no results)", ""]
    r0 = rows[0]
    out += [
        f"`checkpoint::save` / `checkpoint::load` of {r0['bytes_total'] / 1e6:.0f} MB of float32 "
        "tensors sharded Shard(0) over every rank, against a dd-style raw write (write(2) in "
        "64 MB blocks + fsync) and read (read(2)) of each rank's same bytes on the same disk; "
        "load_resharded loads into Shard(1) targets. Reads follow writes, so ours and the raw "
        "ones are served from the page cache alike. Median of the max over ranks, variants "
        "interleaved. Target: save and same-layout load >= 0.8x raw.",
        "",
        "| ranks | op | s | GB/s per rank | GB/s aggregate | vs raw | target |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    why = {
        "save": "the save checksums every byte (CRC-32, ISA-L) and at the commit deletes the "
                "previous checkpoint and fsyncs two directories; the raw write does none of "
                "these. strace -T of `mpirun -np 1 bench_checkpoint --iters 3` (2026-11-26): "
                "each save's unlink of the previous 268 MB file took 43-58 ms and its data "
                "fsync 69-98 ms (which the raw write pays too), on a disk whose speed varies "
                "between runs (the 1-rank save measured 0.43-0.80 of raw on the same code)",
        "load": "the load reads into staging buffers and checksums every byte; once every "
                "rank's checks passed the staging memory is swapped into the targets (nothing "
                "is modified on an error); the raw read reuses a warm buffer",
    }
    order = ["raw_write", "save", "raw_read", "load", "load_resharded"]
    for r in sorted(rows, key=lambda r: (r["ranks"], order.index(r["name"]))):
        st = ""
        if r["name"] in why:
            st = "≥ 0.8: " + tg.ge(f"checkpoint {r['name']} vs raw at {r['ranks']} rank(s)",
                                    r["vs_raw"], 0.8, "x", why=why[r["name"]])
        out.append(f"| {r['ranks']} | {r['name']} | {r['median_us'] / 1e6:.3f} | "
                   f"{r['gbps_per_rank']:.2f} | {r['gbps_aggregate']:.2f} | {r['vs_raw']:.2f} | {st} |")
    out.append("")
    return out


def dp_section(res, tg):
    all_rows = load(os.path.join(res, "bench_dp_np*.jsonl"))
    rows = [r for r in all_rows if r["name"] not in ("async_overlap", "memory")]
    overlap = [r for r in all_rows if r["name"] == "async_overlap"]
    memory = [r for r in all_rows if r["name"] == "memory"]
    out = ["## Data-parallel training step", ""]
    if not rows:
        return out + ["(bench_dp produced no results)", ""]
    r0 = rows[0]
    out += [
        f"One training step (forward, backward, SGD) of a transformer (dim {r0['dim']}, "
        f"{r0['layers']} layers) on {r0['tokens_per_rank']} tokens per rank: `replicate` (DDP, "
        "1 MB buckets so that this small model's ~3.6 MB of gradients fill several, launched "
        "during the backward) and `fully_shard` (one unit per TransformerBlock) against a hand-written "
        "data-parallel step (the same local forward and backward, every gradient packed into "
        "one buffer, one `MPI_Allreduce`, divided by the rank count, SGD). The weights of all "
        "three are compared after the run. Median (max over ranks), variants interleaved in a "
        "shuffled order. Target: within 1.05x of hand-written.",
        "",
        "| ranks | variant | ms (p10-p90) | hand-written ms | ratio | target | weights max abs diff |",
        "|---:|---|---:|---:|---:|---|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["ranks"], r["name"])):
        why = ""
        if r["ranks"] > (os.cpu_count() or 1):
            why = f"{r['ranks']} ranks share {os.cpu_count()} cores (oversubscribed)"
        st = tg.le(f"{r['name']} step / hand-written at {r['ranks']} rank(s)",
                   r["ratio_vs_baseline"], 1.05, "x", why=why)
        out.append(
            f"| {r['ranks']} | {r['name']} | {r['median_us'] / 1e3:.2f} "
            f"({r['p10_us'] / 1e3:.2f}-{r['p90_us'] / 1e3:.2f}) | "
            f"{r['baseline_median_us'] / 1e3:.2f} | {r['ratio_vs_baseline']:.3f} | "
            f"≤ 1.05: {st} | {r['max_weight_diff']:.2g} |")
    out.append("")
    if overlap:
        out += [
            "Async gradient reductions (`dtensor/collectives/comm_worker.h`: they run on the "
            "communication thread while the backward computes): exposed communication = the "
            "replicate step - the same step with no communication at all (compute only), with "
            "the thread (async) and with the reductions inline (`set_async_threaded(false)`). "
            "Target: async hides at least half of it at 2 ranks.",
            "",
            "| ranks | compute only ms | step async ms | step inline ms | exposed async ms "
            "| exposed inline ms | hidden | target |",
            "|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in sorted(overlap, key=lambda r: r["ranks"]):
            tgt = ""
            if r["ranks"] == 2:
                why = ("intra-node MPI moves the data with the CPU (copies through shared "
                       "memory), and 2 ranks on 2 cores leave no idle core for the "
                       "communication thread: its work competes with the backward's instead "
                       "of running beside it; the collective does progress while the caller "
                       "computes (test `redistribute: async_op ...`)")
                tgt = "≥ 50%: " + tg.ge("async hides gradient communication at 2 ranks",
                                        r["hidden_fraction"], 0.5, why=why)
            out.append(
                f"| {r['ranks']} | {r['compute_only_ms']:.2f} | {r['step_async_ms']:.2f} | "
                f"{r['step_inline_ms']:.2f} | {r['exposed_async_ms']:.2f} | "
                f"{r['exposed_inline_ms']:.2f} | {r['hidden_fraction'] * 100:.0f}% | {tgt} |")
        out.append("")
    if memory:
        mb = lambda b: f"{b / 2**20:.2f}"  # noqa: E731
        out += [
            "Memory per rank (`memory_stats()`, max over ranks), after the timed steps: the "
            "parameters each rank stores between steps, the peak of one training step above "
            "its start (activations, gradients, gathered parameters, reduction buffers; the "
            "compute-only step holds the activations and whole gradients alone), and the "
            "per-rank peak, stored parameters + step peak (what a rank needs at most). Targets: "
            "`fully_shard` stores at most total / N + 5% (uneven shards), and its step peak and "
            "its per-rank peak are no higher than `replicate`'s.",
            "",
            "| ranks | parameters MB | total / N MB | stored: replicate MB | stored: fully_shard MB "
            "| target | step peak: compute only MB | replicate MB | fully_shard MB | target "
            "| per-rank peak: replicate MB | fully_shard MB | target |",
            "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---|",
        ]
        for r in sorted(memory, key=lambda r: r["ranks"]):
            n = r["ranks"]
            per = r["total_param_bytes"] / n
            t_store = "≤ total/N + 5%: " + tg.le(
                f"fully_shard parameters stored per rank / (total / N) at {n} rank(s)",
                r["fsdp_stored_bytes"] / per, 1.05, "x")
            rep_total = r["replicate_stored_bytes"] + r["replicate_step_peak_bytes"]
            fsdp_total = r["fsdp_stored_bytes"] + r["fsdp_step_peak_bytes"]
            t_peak = t_total = ""
            if n > 1:
                why = ("the step peak is at the start of fully_shard's backward, where the "
                       "activations peak: beside them fully_shard holds the root unit's gathered "
                       "parameters (never resharded), the last unit's (kept gathered from its "
                       "forward into its backward, which comes first) and the all-gather output "
                       "of the unit prefetched next, parameters that replicate keeps among its "
                       "stored ones, outside the step peak (a unit is ~0.8 MB of this 4.3 MB "
                       "model, whose activations are larger); FSDP2 holds the same. "
                       "replicate's reduced gradients are views of its buckets, so its step peak "
                       "is the compute-only step's; the per-rank peak (stored + step) is the "
                       "figure fully_shard lowers")
                t_peak = "≤ replicate: " + tg.le(
                    f"fully_shard step peak / replicate step peak at {n} rank(s)",
                    r["fsdp_step_peak_bytes"] / max(1, r["replicate_step_peak_bytes"]), 1.0, "x",
                    why=why)
                saved = r["replicate_stored_bytes"] - r["fsdp_stored_bytes"]
                extra = r["fsdp_step_peak_bytes"] - r["replicate_step_peak_bytes"]
                why_total = (f"fully_shard stores {mb(saved)} MB less than replicate and its "
                             f"step peaks {mb(extra)} MB higher (the step-peak line): the saving "
                             "grows with the rank count and the model's size, the cost with "
                             "the size of a unit only")
                t_total = "≤ replicate: " + tg.le(
                    f"fully_shard per-rank peak / replicate per-rank peak at {n} rank(s)",
                    fsdp_total / max(1, rep_total), 1.0, "x", why=why_total)
            out.append(
                f"| {n} | {mb(r['total_param_bytes'])} | {mb(per)} | "
                f"{mb(r['replicate_stored_bytes'])} | {mb(r['fsdp_stored_bytes'])} | {t_store} | "
                f"{mb(r['compute_only_step_peak_bytes'])} | {mb(r['replicate_step_peak_bytes'])} | "
                f"{mb(r['fsdp_step_peak_bytes'])} | {t_peak} | {mb(rep_total)} | "
                f"{mb(fsdp_total)} | {t_total} |")
        out.append("")
    return out


def text_section(res, name, title, intro):
    """A section that shows benchmark `name`'s text output under `title` after `intro`."""
    txt = text(res, f"{name}.txt")
    out = [f"## {title}", ""]
    if not txt:
        return out + [f"(bench_{name} produced no results)", ""]
    return out + [intro, "", "```", txt, "```", ""]


def gather_into_dim_section(res):
    return text_section(
        res, "gather_into_dim", "Gather along a non-leading dim: placed vs gathered and copied",
        "S(1)->R's collective three ways: the raw blocking MPI_Allgather into a preallocated "
        "contiguous buffer (no placement), the Communicator's all_gather then one copy into a "
        "fresh output, and `Communicator::all_gather_into_dim` placing each piece straight into "
        "a fresh output (MPI_Alltoallw with subarray datatypes). The executor places directly "
        "from 256 KB of output up (`kGatherIntoDimMinBytes`), where it measured faster.")


def collective_check_section(res):
    return text_section(
        res, "collective_check", "Collective consistency check",
        "What the check of `dtensor/collectives/communicator.h` costs (every collective's fingerprint "
        "compared across its ranks before any data moves; `DTENSOR_CHECK_COLLECTIVES=0` turns "
        "it off): the same Communicator call with the check off and on, next to the raw "
        "blocking MPI call (the form the backend issues); a collective of at most 192 bytes per rank travels inside the "
        "check's own exchange, so small all_reduce and all_gather cost no more (or less) with "
        "it. µs per collective, median of batches, max over ranks.")


def strategy_section(res):
    txt = text(res, "strategy.txt")
    out = ["## Strategy choice", ""]
    if not txt:
        return out + ["(bench_strategy produced no results)", ""]
    out += [
        "The rule in `dtensor/core/propagation/sharding_propagation.h`, measured: c = a @ a^T with a "
        "[M, K] laid out [S(0), R] on a 2x2 mesh (4 ranks). `chosen` = what dispatch picks; "
        "`chunked+reduce` = the layout the rule used to pick (both replicated operands chunked "
        "along K on mesh dim 1, output [S(0), P(sum)]) with the all-reduce that resolves the "
        "Partial; `chunked, pending` = the same without that all-reduce (what the op alone cost "
        "before). Milliseconds, median of the max over ranks.",
        "", "```", txt, "```", "",
        "The rule counts communication only (as PyTorch's cost model does): on latency- and "
        "bandwidth-bound shapes it picks the faster layout and a result with nothing pending; "
        "where the flops dominate (large M and K, and here 4 ranks share 2 cores, which doubles "
        "the cost of duplicated flops) the chunked layout, which halves the flops, can be "
        "faster. A user who wants it lays the operands out chunked (as the benchmark does); a "
        "compute term in the cost model is left for when per-op flop counts exist.",
        "",
    ]
    return out


def rng_section(res):
    txt = text(res, "rng.txt")
    out = ["## RNG", ""]
    if not txt:
        return out + ["(bench_rng produced no results)", ""]
    out += [
        "`fill_random` into a preallocated float32 tensor (no allocation), median of >= 3 "
        "repetitions; every run checks elements against the direct Philox formula. `scalar` is "
        "the plain loop (one `philox4x32_10` call per 4 words, one block at a time) that the "
        "vectorised path replaces. On a shared machine the wall-clock columns mostly measure the "
        "other jobs; `cpu_GB/s` (bytes / (process CPU time / threads)) is the rate on "
        "uncontended cores.",
        "", "```", txt, "```", "",
    ]
    rows = {}
    for line in txt.splitlines():
        m = re.match(r"(uniform|normal|scalar)\s+(\d+) MB\s+(\d+)\s+\S+\s+\S+\s+(\S+)", line)
        if m:
            rows[(m.group(1), int(m.group(2)), int(m.group(3)))] = float(m.group(4))
    shard = re.findall(r"^(\d+)\s+\S+\s+\S+\s+(\S+)$", txt.split("sharded")[-1], re.M)
    if rows:
        big = max(k[1] for k in rows)
        u1, n1 = rows.get(("uniform", big, 1)), rows.get(("normal", big, 1))
        sc = rows.get(("scalar", big, 1))
        threads = max(k[2] for k in rows)
        un = rows.get(("uniform", big, threads))
        out.append("Reading it (figures from the table above, largest size):")
        if u1 and sc:
            out.append(f"- Uniform float32, 1 thread: {u1:.2f} GB/s of CPU time, {u1 / sc:.1f}x "
                       f"the scalar loop ({sc:.2f} GB/s). The Philox blocks come from AVX2 "
                       "intrinsics; the per-element loop is compiled for AVX2 and baseline x86-64 "
                       "(`target_clones`).")
        if n1:
            out.append(f"- Normal float32, 1 thread: {n1:.2f} GB/s of CPU time (branch-free "
                       "Box-Muller with polynomial log/cos that vectorise).")
        if un and u1 and threads > 1:
            out.append(f"- {threads} threads: cpu_GB/s {un:.2f}, {un / u1:.2f}x one thread (the "
                       f"ideal is {threads}x when the work splits evenly over the threads and "
                       "each gets a core; below that, the threads waited for a core).")
    if shard:
        cells = ", ".join(f"k={k}: {float(v):.3f} (ideal {1 / int(k):.3f})" for k, v in shard)
        out.append(f"- Sharded generation costs what the local block costs: CPU time of one row "
                   f"block of k relative to the whole, {cells}.")
    out.append("")
    return out


def kernels_section(res, tg):
    ours = kernels_report.load_rounds(res, "ours")
    torch = kernels_report.load_rounds(res, "torch")
    out = ["## Local CPU kernels", ""]
    if not ours:
        return out + ["(bench_kernels produced no results)", ""]
    out += [kernels_report.describe(ours, torch), ""]
    if not torch:
        out += ["PyTorch was not available to this run (see `TORCH_VENV` in scripts/bench.sh), so "
                "the ratio column is empty; docs/KERNELS.md holds the last side-by-side run "
                "(`scripts/bench_kernels_vs_pytorch.sh --doc`).", ""]

    def status(name, ratio, target):
        return tg.le(f"kernel {name} time / PyTorch's", ratio, target, "x",
                     why=kernels_report.NOTES.get(name, ""))

    out += kernels_report.table(ours, torch, status)
    out += [""] + kernels_report.gemm_table(ours, torch)
    out += ["", "Several alternating rounds, with the machine's load: docs/KERNELS.md.", ""]
    out += kernels_report.threads_table(res, ours)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--build-dir", default="build-bench")
    ap.add_argument("--load-before", default="")
    ap.add_argument("--load-after", default="")
    ap.add_argument("--seconds", default="?")
    ap.add_argument("--env", default="")
    # When the benchmarks started (default: now), so that re-rendering a report from saved
    # results keeps the date of the run.
    ap.add_argument("--date", default="")
    args = ap.parse_args()
    res = args.results
    tg = Targets()
    body = []
    # Read before args.out is rewritten below.
    dispatch_notes = doc_sections.keep(args.out, DISPATCH_NOTES_BEGIN, DISPATCH_NOTES_END)
    body += dispatch_section(res, tg, dispatch_notes)
    body += cache_section(res, tg)
    body += redistribute_section(res, tg)
    body += tp_section(res, tg)
    body += train_section(res, tg)
    body += dp_section(res, tg)
    body += compile_section(res, tg)
    body += strategy_section(res)
    body += collective_check_section(res)
    body += checkpoint_section(res, tg)
    body += gather_into_dim_section(res)
    body += rng_section(res)
    body += kernels_section(res, tg)
    # Every table says which CPU and GEMM kernel produced it (issue 40: the same code ran 3x
    # slower on a CPU whose OpenBLAS kernel was a generic fallback).
    tag = machine_tag(res)
    body = [x for line in body for x in ([line, "", tag] if line.startswith("## ") else [line])]
    cmds = text(res, "commands.txt")
    failures = text(res, "failures.txt")
    head = [
        "# Performance",
        "",
        "Generated by `scripts/bench.sh` (do not edit by hand: rerun the script). Every figure "
        "below comes from the run described here; raw JSON lines are in "
        f"`{args.build_dir}/benchmarks/results/`.",
        "",
        "## Machine and command",
        "",
        machine(args),
        "",
        "Command:",
        "",
        "```",
        f"{args.env} scripts/bench.sh".strip(),
        "```",
        "",
        "which ran (after `cmake -S . -B " + args.build_dir + " -DCMAKE_BUILD_TYPE=Release "
        "-DDTENSOR_CUDA=OFF` and building the benchmark targets), with "
        "`OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1` and `mpirun` = `mpirun --allow-run-as-root "
        "--oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca "
        "btl_vader_single_copy_mechanism none`:",
        "",
        "```",
        cmds,
        "```",
        "",
    ]
    if failures:
        head += ["**Benchmarks that exited with an error:**", "", "```", failures, "```", ""]
    summary = ["## Targets", ""]
    if tg.missed:
        summary.append(f"{tg.count - len(tg.missed)} of {tg.count} target comparisons met. "
                       "Missed:")
        summary.append("")
        for what, detail, pct, why in tg.missed:
            summary.append(f"- {what}: missed by {pct:.0f}% ({detail}): why: "
                           f"{why or '_to be filled in after profiling_'}.")
        if any(BACKEND_WHY in m[3] for m in tg.missed):
            summary += ["", BACKEND_NOTE]
    else:
        summary.append(f"All {tg.count} target comparisons met.")
    summary.append("")
    # The PyTorch side-by-side section (scripts/bench_vs_pytorch.sh --doc) and the GPU section
    # (scripts/bench_gpu.sh --doc, on a GPU machine) come from separate runs with their own date,
    # command and machine: carried over as they are; so does "Op coverage II"
    # (benchmarks/kernels/bench_ops2_torch.py --doc, which needs torch: matched by its markers),
    # and "Models and the other parallelisms" (the Llama beside transformers, ring attention,
    # pipeline bubbles, planning at scale: each table with its own command and date).
    kept = [k for k in (vs_pytorch_report.keep_section(args.out),
                        doc_sections.keep(args.out, gpu_report.BEGIN, gpu_report.END),
                        doc_sections.keep(args.out, "<!-- ops2:begin", "<!-- ops2:end -->"),
                        doc_sections.keep(args.out, "<!-- models:begin", "<!-- models:end -->"))
            if k]
    with open(args.out, "w") as fh:
        fh.write("\n".join(head + summary + body).rstrip() + "\n")
        for k in kept:
            fh.write("\n" + k + "\n")


if __name__ == "__main__":
    main()
