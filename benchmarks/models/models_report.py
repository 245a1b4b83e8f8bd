"""The "Models and the other parallelisms" section of docs/PERFORMANCE.md from the results
scripts/bench_models.sh leaves in <build>/benchmarks/results/models/ (JSON lines of bench_llama,
bench_llama_torch.py, bench_pipeline, bench_ring_attention, bench_planning_scale; the dry run's
text report; the load average before and after each table). Prints the section; with --out,
replaces it in that file between its markers (benchmarks/common/doc_sections.py).

    python3 models_report.py --results DIR [--command "..."] [--out docs/PERFORMANCE.md]
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import doc_sections  # noqa: E402

BEGIN = ("<!-- models:begin (figures of the models and the other parallelisms; each table with "
         "its own command and date) -->")
END = "<!-- models:end -->"
# The CPU flags that decide which kernels run (GEMM cores, bf16).
FLAGS = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "amx_tile"]
MPI_FLAGS = ("mpirun --allow-run-as-root --oversubscribe --bind-to none "
             "--mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none")


def records(path):
    """The JSON records of one file, by name ({} when the file is missing or empty)."""
    out = {}
    if os.path.exists(path):
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                out[r["name"]] = r
    return out


def spread(values):
    """'median [min, max]' of ratios."""
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def ms(v):
    return f"{v:.3f} ms" if v < 10 else f"{v:.1f} ms"


def tokens(per_s):
    return f"{per_s / 1000:.1f}k" if per_s >= 1000 else f"{per_s:.0f}"


class Results:
    def __init__(self, folder):
        self.dir = folder
        self.machine = {}
        for line in open(os.path.join(folder, "machine.txt")):
            k, _, v = line.rstrip("\n").partition(" ")
            self.machine[k] = v
        self.loads = {}  # section -> {"begin": (time, l1, l5, l15), "end": ...}
        path = os.path.join(folder, "loads.txt")
        for line in open(path) if os.path.exists(path) else []:
            name, when, time, *load = line.split()
            self.loads.setdefault(name, {})[when] = (time, *load)
        self.commands = {}
        path = os.path.join(folder, "commands.txt")
        for line in open(path) if os.path.exists(path) else []:
            name, _, cmd = line.rstrip("\n").partition(" ")
            self.commands.setdefault(name, []).append(cmd)
        path = os.path.join(folder, "failures.txt")
        self.failures = open(path).read().splitlines() if os.path.exists(path) else []

    def path(self, name):
        return os.path.join(self.dir, name)

    def pairs(self, prefix):
        """Counted pair indices of files PREFIX.pN.jsonl (p0, the warm-up pair, left out)."""
        found = []
        for f in glob.glob(self.path(prefix + ".p*.jsonl")):
            n = int(re.search(r"\.p(\d+)\.jsonl$", f).group(1))
            if n > 0:
                found.append(n)
        return sorted(found)

    def load_note(self, section):
        """('12:01-12:05 UTC, 1-minute load average 0.4 before, 1.9 after ...', heading note)."""
        l = self.loads.get(section, {})
        if "begin" not in l or "end" not in l:
            return "load not recorded", "load not recorded"
        b, e = l["begin"], l["end"]
        # Above 1 before the table: other work shared the cores (provisional). Above 1 only
        # after it: the table's own ranks (2 to 4 busy processes on 2 cores) raised it.
        above = ("load above 1: provisional" if float(b[1]) > 1.0 else
                 "load above 1 after it: its own ranks" if float(e[1]) > 1.0 else "")
        return (f"{b[0]}-{e[0]} UTC, 1-minute load average {b[1]} before, {e[1]} after "
                f"(5-minute {b[2]} / {e[2]})"), above

    def gemm(self):
        """dtensor's config_str() as bench_llama's header prints it."""
        for f in sorted(glob.glob(self.path("ours.*.log")) + glob.glob(self.path("tp1for*.log"))):
            for line in open(f):
                if line.startswith("# bench_llama") and "(max over ranks); " in line:
                    return line.split("(max over ranks); ", 1)[1].strip()
        return "?"

    def heading(self, title, section, lines):
        note, above = self.load_note(section)
        lines.append("")
        lines.append(f"### {title}" + (f" ({above})" if above else ""))
        lines.append("")
        lines.append(f"Taken {note}.")
        return above

    def command_block(self, section, lines):
        cmds = self.commands.get(section, [])
        if cmds:
            lines += ["", "```"] + [c.replace(MPI_FLAGS, "$MPIRUN") for c in cmds] + ["```"]


def row_ms(rec, row):
    """A bench_llama row's time in ms: the median, or for decode the ms per decode step."""
    return rec["decode_ms_per_token"] if row == "greedy_decode" else rec["median_us"] / 1e3


def llama_pairs(res, config):
    """{row: [(ours, theirs), ...]} in ms (decode: ms per token) over the counted pairs."""
    rows = {"forward": [], "forward_backward": [], "greedy_decode": []}
    for p in res.pairs(f"ours.{config}"):
        ours = records(res.path(f"ours.{config}.p{p}.jsonl"))
        theirs = records(res.path(f"torch.{config}.p{p}.jsonl"))
        for row, pairs in rows.items():
            if row in ours and row in theirs:
                pairs.append((row_ms(ours[row], row), row_ms(theirs[row], row)))
    return rows


def tiny_losses(res):
    """What the first counted tiny pair says of the two sides' losses (same weights, same
    batch: they should agree)."""
    found = []
    for who in ("ours", "torch"):
        path = res.path(f"{who}.tiny.p1.log")
        m = re.search(r"\(loss ([\d.]+)\)", open(path).read()) if os.path.exists(path) else None
        found.append(m.group(1) if m else "?")
    if found[0] == found[1]:
        return f"both sides print the same loss ({found[0]})"
    return f"the losses differ: dtensor {found[0]}, transformers {found[1]}"


def llama_section(res, configs, lines):
    res.heading("Llama beside transformers (issue 43 item 7)", "llama", lines)
    lines += [
        "",
        "- Ours: dtensor Release build, one thread, the GEMM of the header. The model through "
        "its user path: `models::Llama` on local DTensors (parallelized with "
        "`parallelize_llama` over all ranks when there are several), `causal_lm_loss`, "
        "`backward`, `models::generate`.",
        f"- Theirs: {res.machine.get('torch', '?')}, eager CPU, `torch.set_num_threads(1)`, "
        "`attn_implementation=\"eager\"`, float32.",
        "- Configs. tiny: the committed `tests/data/tiny_llama` (transformers' own "
        "save_pretrained: vocab 256, hidden 64, intermediate 160, 2 layers, 4 heads, 2 kv heads), "
        f"batch 2 x 12 tokens; {tiny_losses(res)}. medium: vocab 1024, hidden "
        "512, intermediate 1408, 4 layers, 8 heads, 4 kv heads (head_dim 64), seeded random "
        "weights (the two sides' weights differ, the shapes do not), batch 2 x 64. Inputs: token "
        "`(i * 7 + 3) % vocab` at flat index i, both sides.",
        "- Rows. forward: without recording (`NoGradGuard` / `torch.inference_mode()`, "
        "`use_cache=False`). forward+backward: zero_grad, forward, the causal LM loss, backward. "
        "The two interleaved, each the median of ITERS runs after 2 warm-ups. decode: greedy, "
        "batch 1, prompt 16, `generate(max_new_tokens=1)` and `generate(max_new_tokens=65)` "
        "interleaved, a decode step = (long - short) / 64 (tokens/s counts decode steps with the "
        "KV cache, not the prefill); eos off on both sides, transformers with its own cache.",
        "- Pairing: the two programs run as whole processes alternately, ours then theirs, 1 "
        "warm-up pair then the counted pairs per config; each process prints its own medians; the "
        "ratio is taken pair by pair (ours / theirs), its median, min and max given. The dtensor "
        "and transformers columns are the medians over the pairs.",
    ]
    res.command_block("llama", lines)
    n_pairs = len(res.pairs(f"ours.{configs[0]}")) if configs else 0
    lines += ["", f"#### One rank beside transformers ({n_pairs} pairs; ratio = ours / theirs "
              "per pair)", "",
              "| config | row | dtensor | transformers | ratio median [min, max] | target | |",
              "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    verdicts = []
    for c in configs:
        rows = llama_pairs(res, c)
        shape = "2 x 12" if c == "tiny" else "2 x 64"
        for row, label in (("forward", f"forward, {shape}"),
                           ("forward_backward", f"forward+backward, {shape}"),
                           ("greedy_decode", "decode, prompt 16, 64 new")):
            pairs = rows[row]
            if not pairs:
                lines.append(f"| {c} | {label} | - | - | no data | | missing |")
                verdicts.append(False)
                continue
            o = statistics.median(p[0] for p in pairs)
            t = statistics.median(p[1] for p in pairs)
            ratios = [p[0] / p[1] for p in pairs]
            met = statistics.median(ratios) <= 1.0
            verdicts.append(met)
            if row == "greedy_decode":
                cells = (f"{o:.3f} ms/token = {tokens(1e3 / o)} tokens/s",
                         f"{t:.3f} ms/token = {tokens(1e3 / t)} tokens/s",
                         f"{spread(ratios)} ({1 / statistics.median(ratios):.1f}x the tokens/s)",
                         ">= 1x tokens/s")
            else:
                cells = (ms(o), ms(t), spread(ratios), "<= 1.0x")
            lines.append(f"| {c} | {label} | " + " | ".join(cells) +
                         f" | {'met' if met else 'MISSED'} |")
    lines += [
        "",
        ("Every target holds in the pairs' median ratio." if all(verdicts) else
         "**Not every target holds** (MISSED rows above)."),
        "",
        "Why: on the tiny model every op is a few microseconds of arithmetic and the time is "
        "per-op overhead: transformers' Python modules and PyTorch's eager dispatch against "
        "dtensor's C++ dispatch (a `perf record` of our tiny run showed dispatch, sharding "
        "propagation and malloc/free at the top, the Llama's own code small). On the medium "
        "model the GEMMs dominate; a likely reason for the gap there, not measured separately, "
        "is that PyTorch's CPU build runs its GEMMs through MKL, which on AMD CPUs need not take "
        "its AVX-512 path, while dtensor's OpenBLAS runs the core named above. Decode's "
        "projections are one-row GEMMs: since commit a59b0ef dtensor sends them to `?gemv` "
        "(`cblas_sgemm` with M = 1 packed the whole weight on every call: 3-7x slower than "
        "`cblas_sgemv` at [1, 512] @ [1408, 512]^T and at Llama 7B's sizes, measured alone).",
    ]


def tp_section(res, configs, tp_ranks, lines):
    res.heading("Tensor parallel scaling (issue 43 item 7; ours, speedup = tp 1 time / tp N time "
                "per pair)", "tp", lines)
    cores = int(res.machine.get("cores", "2"))
    lines += ["",
              "Paired whole-process runs, tp N then tp 1, per config and N. tp N ranks beyond the "
              f"{cores} cores are oversubscribed: they time the scheduler as much as the model, "
              "and carry no target. Per forward the TP plan runs 2 all-reduces per decoder layer, "
              "one for the embedding and the logits' all-gather, as many again in backward."]
    res.command_block("tp", lines)
    head = "| config | row | tp 1 |"
    sep = "| --- | --- | ---: |"
    for n in tp_ranks:
        head += f" tp {n} | speedup tp {n} median [min, max] |"
        sep += " ---: | ---: |"
    lines += ["", head + " target (tp N <= cores: speedup > 1) | |", sep + " --- | --- |"]
    for c in configs:
        for row, label in (("forward", "forward"), ("forward_backward", "forward+backward"),
                           ("greedy_decode", "decode (ms/token)")):
            one, cells, verdict = [], [], []
            for n in tp_ranks:
                speed, times = [], []
                for p in res.pairs(f"tp{n}.{c}"):
                    a = records(res.path(f"tp{n}.{c}.p{p}.jsonl")).get(row)
                    b = records(res.path(f"tp1for{n}.{c}.p{p}.jsonl")).get(row)
                    if a and b:
                        ta, tb = row_ms(a, row), row_ms(b, row)
                        times.append(ta)
                        one.append(tb)
                        speed.append(tb / ta)
                cells.append(ms(statistics.median(times)) if times else "-")
                cells.append(spread(speed))
                if n <= cores and speed and c != "tiny":
                    verdict.append(f"tp {n} {'met' if statistics.median(speed) > 1 else 'MISSED'}")
            base = ms(statistics.median(one)) if one else "-"
            target = "; ".join(verdict) if verdict else (
                "none (overhead-bound)" if c == "tiny" else "none")
            lines.append(f"| {c} | {label} | {base} | " + " | ".join(cells) + f" | {target} | |")
    lines += ["",
              "The tiny model (hidden 64) is all per-op and per-collective overhead and does not "
              "scale on any machine: it is there to show the collectives' cost. The medium "
              "model's tp 2 speedup is the scaling figure on this machine."]


def below_gpipe(r, gpipe, rank):
    """1F1B's memory target on one rank: below GPipe's peak where the schedule keeps fewer
    microbatches in flight (p - rank < m), no more than GPipe's (within 10%) where it keeps as
    many (rank 0 when m <= p)."""
    mine, theirs = r[f"peak_mib_rank{rank}"], gpipe[f"peak_mib_rank{rank}"]
    if r[f"in_flight_rank{rank}"] < gpipe[f"in_flight_rank{rank}"]:
        return mine < theirs
    return mine <= 1.1 * theirs


def pipeline_section(res, pp_ranks, lines):
    res.heading("Pipeline bubbles and memory (issue 45 item 4)", "pipeline", lines)
    lines += ["",
              "`benchmarks/pipeline/bench_pipeline`: 8 TransformerBlocks (dim 128), microbatches "
              "of 2 x 64 tokens, one rank per stage (interleaved: 2 stages per rank); bubble = "
              "1 - (busy time summed over ranks / (ranks x step time)), median over the steps; "
              "theory (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(vm+p-1) interleaved (v = 2); "
              "replay: the schedule's own order on the cost model (forward 1, backward 2); peak "
              "memory: the allocator's peak during the step above what was held before it, per "
              "rank (the activations kept for backward). Target: 1F1B's peak below GPipe's on "
              "every rank where it keeps fewer microbatches in flight (p - r < m on rank r), and "
              "no more than GPipe's (within 10%) where it keeps as many."]
    res.command_block("pipeline", lines)
    lines += ["", "| pp | schedule | m | bubble measured | theory | replay | step ms | "
              "peak MiB per rank (r0 / r1 / ...) | 1F1B below GPipe |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    verdicts = []
    for n in pp_ranks:
        recs = records(res.path(f"pp{n}.jsonl"))
        for m in (4, 8):
            gpipe = recs.get(f"GPipe.m{m}")
            for sched in ("GPipe", "1F1B", "Interleaved1F1B"):
                r = recs.get(f"{sched}.m{m}")
                if not r:
                    continue
                peaks = [r[f"peak_mib_rank{k}"] for k in range(n)]
                verdict = ""
                if sched == "1F1B" and gpipe:
                    ok = all(below_gpipe(r, gpipe, k) for k in range(n))
                    verdicts.append(ok)
                    verdict = "met" if ok else "MISSED"
                lines.append(f"| {n} | {sched} | {m} | {r['bubble']:.2f} | "
                             f"{r['bubble_theory']:.2f} | {r['bubble_replay']:.2f} | "
                             f"{r['step_ms']:.1f} | "
                             + " / ".join(f"{p:.1f}" for p in peaks) + f" | {verdict} |")
    cores = int(res.machine.get("cores", "2"))
    lines += ["",
              ("1F1B holds less than GPipe wherever it keeps fewer microbatches in flight (at most "
               "p - r on rank r against all m), and its peak is flat in m."
               if verdicts and all(verdicts) else
               "**1F1B's peak is not below GPipe's where it should be** (MISSED rows)."),
              "The measured bubble includes what the cost model leaves out: the send/recv "
              "waits between stages, the loss, and the gap between a stage's work items; the "
              f"replay column is the schedule's own bubble. At pp above {cores} the ranks share "
              "cores, so their busy times include waiting for a core."]


def ring_section(res, cp_ranks, lines):
    res.heading("Ring attention (context parallel; issue 45 item 4)", "ring", lines)
    lines += ["",
              "`benchmarks/context_parallel/bench_ring_attention`: q/k/v [1, 4, 2048, 64] "
              "float32 sequence-sharded over cp ranks; ring (`dt::ring_attention`, k/v blocks "
              "passed round the ring behind the blocks' compute; causal in the head-tail layout) "
              "against gather (k/v all-gathered, then local attention on the query shard). "
              "Medians over the interleaved runs inside a process (max over ranks), then the "
              "median over processes; ratio = ring / gather per process. comm: the ring's "
              "messages alone; wait: the time the ring waited for them after each block, min and "
              "max over ranks (a rank's wait includes its predecessor's lateness: the min is the "
              "nearest to the exposed communication); hidden = 1 - min wait / comm (1: all the "
              "ring's communication ran behind compute). Target: "
              "causal ring no slower than gathering."]
    res.command_block("ring", lines)
    lines += ["", "| cp | case | ring fwd ms | gather fwd ms | ratio fwd | ring fwd+bwd ms | "
              "gather fwd+bwd ms | ratio fwd+bwd | comm fwd ms | wait fwd ms min / max | "
              "hidden fwd | "
              "hidden bwd | target |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| --- |"]
    cores = int(res.machine.get("cores", "2"))
    for n in cp_ranks:
        runs = [records(f) for f in sorted(glob.glob(res.path(f"ring.cp{n}.r*.jsonl")))]
        for case in ("causal", "full"):
            rs = [r[case] for r in runs if case in r]
            if not rs:
                continue

            def med(key):
                return statistics.median(r[key] for r in rs)

            rf = [r["ring_fwd_median_us"] / r["gather_fwd_median_us"] for r in rs]
            rfb = [r["ring_fwd_bwd_median_us"] / r["gather_fwd_bwd_median_us"] for r in rs]
            target = "-"
            if case == "causal":
                ok = statistics.median(rfb) <= 1 and statistics.median(rf) <= 1
                target = ("met" if ok else "MISSED") + (" (oversubscribed)" if n > cores else "")
            lines.append(
                f"| {n} | {case} | {med('ring_fwd_median_us') / 1e3:.1f} | "
                f"{med('gather_fwd_median_us') / 1e3:.1f} | {spread(rf)} | "
                f"{med('ring_fwd_bwd_median_us') / 1e3:.1f} | "
                f"{med('gather_fwd_bwd_median_us') / 1e3:.1f} | {spread(rfb)} | "
                f"{med('ring_comm_fwd_median_us') / 1e3:.2f} | {med('ring_wait_fwd_ms'):.2f} / "
                f"{med('ring_wait_fwd_max_ms') if 'ring_wait_fwd_max_ms' in rs[0] else 0:.2f} | "
                f"{med('hidden_fwd'):.2f} | {med('hidden_bwd'):.2f} | {target} |")
    lines += ["",
              "Causal attention is where the ring's load balance (each rank a head and a tail "
              "chunk) pays: gathering leaves the last rank the most work. Full attention does "
              f"the same work either way. At cp above {cores} the ranks share cores: the waits "
              "then measure the scheduler as much as the ring."]


def planning_section(res, lines):
    res.heading("Planning at scale (issue 46 item 5)", "planning", lines)
    lines += ["",
              "`benchmarks/planning_scale/bench_planning_scale` under the fake backend (one "
              "process plays rank 0), microseconds per call, median: a propagation-cache miss of "
              "`mm` and of `add` (`propagate_uncached`: the strategy search with each candidate's "
              "redistribute cost) and a redistribute plan (`find_redistribute_plan`), on meshes "
              "of 8 to 65,536 ranks split over 1 to 4 dims. Target: flat in the number of ranks "
              "(at most 2x from the fewest to the most ranks, per number of mesh dims)."]
    res.command_block("planning", lines)
    recs = []
    path = res.path("planning.jsonl")
    for line in open(path) if os.path.exists(path) else []:
        if line.strip():
            recs.append(json.loads(line))
    lines += ["", "| ranks | mesh | build ms | mm miss us | add miss us | plan us |",
              "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in recs:
        lines.append(f"| {r['ranks']:,} | {r['mesh']} | {r['mesh_build_us'] / 1e3:.2f} | "
                     f"{r['mm_miss_median_us']:,.1f} | {r['add_miss_median_us']:,.1f} | "
                     f"{r['plan_median_us']:,.1f} |")
    lines += ["", "| mesh dims | ranks | mm miss growth | add miss growth | plan growth | "
              "target | |", "| ---: | --- | ---: | ---: | ---: | --- | --- |"]
    for ndim in sorted({r["mesh_dims"] for r in recs}):
        rs = [r for r in recs if r["mesh_dims"] == ndim]
        lo, hi = rs[0], rs[-1]
        growth = [hi[k] / lo[k] for k in ("mm_miss_median_us", "add_miss_median_us",
                                          "plan_median_us")]
        ok = max(growth) <= 2.0
        lines.append(f"| {ndim} | {lo['ranks']:,} -> {hi['ranks']:,} | "
                     + " | ".join(f"{g:.2f}x" for g in growth)
                     + f" | <= 2x | {'met' if ok else 'MISSED'} |")
    lines += ["",
              "The costs grow with the number of mesh dims (the strategy expansion), not with "
              "the ranks; building a mesh is O(ranks) per dim under the fake backend (its "
              "communicators come from member lists). A cached call costs what it does on a "
              "small mesh."]


def dry_run_expectation(args, dp):
    """Per-rank bytes of FSDP over `dp` ranks of the Llama the dry run's flags describe: each
    parameter sharded on dim 0 (ceil(dim0 / dp) rows per rank), laid in a flat buffer slot
    rounded up to 16 elements (dtensor/parallel/data_parallel/data_parallel.cc kFlatAlign).
    Returns (parameter bytes per rank, padded bytes per unit: [root, layer 0, ...])."""
    H, L = args["hidden"], args["layers"]
    heads, kv, inter, vocab = args["heads"], args["kv-heads"], args["intermediate"], args["vocab"]
    hd = args.get("head-dim", H // heads)
    layer = [(heads * hd, H), (kv * hd, H), (kv * hd, H), (H, heads * hd),
             (inter, H), (inter, H), (H, inter), (H, 1), (H, 1)]
    root = [(vocab, H), (H, 1), (vocab, H)]  # embedding, final norm, untied lm_head

    def shard(params, align):
        total = 0
        for dim0, rest in params:
            n = math.ceil(dim0 / dp) * rest
            total += (math.ceil(n / 16) * 16 if align else n) * 4
        return total

    params = shard(root, False) + L * shard(layer, False)
    return params, [shard(root, True)] + [shard(layer, True)] * L


def dry_run_section(res, lines):
    res.heading("A large dry run beside its analytic figures (issue 46 item 5)", "dryrun", lines)
    log = open(res.path("dryrun.log")).read() if os.path.exists(res.path("dryrun.log")) else ""
    argv = open(res.path("dryrun.args")).read().split() if os.path.exists(
        res.path("dryrun.args")) else []
    args = {argv[i][2:]: argv[i + 1] for i in range(len(argv) - 1)
            if argv[i].startswith("--") and not argv[i + 1].startswith("--")}
    res.command_block("dryrun", lines)
    coll = {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^mesh dim 0 \(dp\)\s+(\w+)\s+(\d+)\s+(\d+)$", log, re.M)}
    pm = re.search(r"parameters\s+[\d.]+ \((\d+) bytes\)", log)
    plan = re.search(r"^planning: (.*)$", log, re.M)
    if "mesh" not in args or not coll or not pm:
        lines += ["", "No dry-run figures (see dryrun.log)."]
        return
    dp = int(args["mesh"])
    ints = {k: int(v) for k, v in args.items() if v.isdigit()}
    params, units = dry_run_expectation(ints, dp)
    total = sum(units)
    # Forward gathers every unit; backward gathers again the units resharded after forward:
    # all but the root (never resharded) and the last layer (its backward runs right after).
    ag_count, ag_bytes = 2 * len(units) - 2, 2 * total - units[0] - units[-1]
    rows = [("parameters per rank (bytes)", "-", f"{int(pm.group(1)):,}", "-", f"{params:,}"),
            ("all_gather per rank", coll.get("all_gather", (0, 0))[0],
             f"{coll.get('all_gather', (0, 0))[1]:,}", ag_count, f"{ag_bytes:,}"),
            ("reduce_scatter per rank", coll.get("reduce_scatter", (0, 0))[0],
             f"{coll.get('reduce_scatter', (0, 0))[1]:,}", len(units), f"{dp * total:,}")]
    ok = (int(pm.group(1)) == params and coll.get("all_gather", (0, 0)) == (ag_count, ag_bytes)
          and coll.get("reduce_scatter", (0, 0)) == (len(units), dp * total))
    lines += ["",
              f"Llama 3 70B's shape (hidden {args['hidden']}, {args['layers']} layers, "
              f"{args['heads']} heads, {args['kv-heads']} kv heads, intermediate "
              f"{args['intermediate']}, vocab {args['vocab']}, untied), FSDP over dp = {dp:,} "
              "ranks on meta tensors, one training step as rank 0. Analytic: each parameter is "
              "sharded on dim 0 (ceil(dim0 / dp) rows per rank) and placed in its unit's flat "
              "buffer at a 16-element boundary; a unit is a decoder layer, the root holds the "
              "embedding, final norm and lm_head. A reduce-scatter takes the whole padded unit "
              "(dp x its shard); forward gathers every unit, backward again all but the root "
              "(never resharded) and the last layer. Target: the dry run's figures equal the "
              "analytic ones.",
              "", "| figure | count | dry run bytes | analytic count | analytic bytes |",
              "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    lines += ["", ("All three equal the analytic figures: met." if ok else
                   "**The dry run differs from the analytic figures: MISSED.**")
              + (f" Planning: {plan.group(1)}." if plan else "")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--command", default="scripts/bench_models.sh --doc")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    res = Results(a.results)
    m = res.machine
    present = set(m.get("flags", "").split())
    cmds = " ".join(res.commands.get("llama", []) + res.commands.get("tp", []))
    configs = [c for c in ("tiny", "medium") if f"--config {c}" in cmds]
    tp_ranks = sorted({int(x) for x in re.findall(r"-np (\d+) \S*bench_llama",
                                                   " ".join(res.commands.get("tp", [])))})
    pp_ranks = sorted({int(x) for x in re.findall(r"-np (\d+)",
                                                  " ".join(res.commands.get("pipeline", [])))})
    cp_ranks = sorted({int(x) for x in re.findall(r"-np (\d+)",
                                                  " ".join(res.commands.get("ring", [])))})
    lines = [BEGIN, "## Models and the other parallelisms", "",
             f"_Generated by `{a.command}` (benchmarks/models/models_report.py) on "
             f"{m.get('date', '?')}. CPU: {m.get('cpu', '?')}, {m.get('cores', '?')} logical "
             f"cores, {m.get('mem_gib', '?')} GiB; flags: "
             f"{' '.join(f for f in FLAGS if f in present) or 'none of ' + ' '.join(FLAGS)}; "
             f"dtensor::config_str(): {res.gemm()}._",
             "",
             "Every program runs one compute thread per rank (`OPENBLAS_NUM_THREADS=1 "
             "OMP_NUM_THREADS=1`, OPENBLAS_CORETYPE unset so dtensor picks the GEMM core); "
             f"`$MPIRUN` below is `{MPI_FLAGS}`; `build` is scripts/build.sh's folder. Each "
             "table gives the load average before and after it and says so in its heading when the "
             "1-minute load was above 1: before the table (other work shared the cores: "
             "provisional, absolute times inflated, paired ratios less so), or only after it "
             "(the multi-rank runs keep both cores busy and raise the load themselves; the "
             "1-minute average decays over minutes, so the load before a table also carries the "
             "tables just before it)."]
    if res.failures:
        # "LOG: exit status N: COMMAND": the log's name and the status (the command is above).
        lines += ["", "**Failed runs** (their logs in the results folder): "
                  + "; ".join(": ".join(f.split(": ")[:2]) for f in res.failures)]
    llama_section(res, configs, lines)
    pipeline_section(res, pp_ranks, lines)
    tp_section(res, configs, tp_ranks, lines)
    ring_section(res, cp_ranks, lines)
    planning_section(res, lines)
    dry_run_section(res, lines)
    lines.append(END)
    print("\n".join(lines))
    if a.out:
        doc_sections.splice(a.out, "<!-- models:begin", END, lines)


if __name__ == "__main__":
    main()
