#!/usr/bin/env python3
"""The "PyTorch DTensor side by side" section of docs/PERFORMANCE.md: our distributed benchmarks
(bench_dispatch, bench_redistribute, bench_tp, bench_train; MPI) beside the same workloads under
PyTorch DTensor (benchmarks/pytorch/*_torch.py; gloo), with the ratio ours / PyTorch (below 1:
ours is faster).

Inputs are JSON lines in a results folder, <who>.r<N>.<workload>.np<ranks>.jsonl with who = ours
or torch and N the round (scripts/bench_vs_pytorch.sh runs the two alternately workload by
workload). Rows pair on (workload, name, ranks, bytes); a figure is the median over rounds of the
per-round medians. --out splices the section into the file between its markers (appended when
absent); benchmarks/make_report.py carries the section over when it regenerates the file
(keep_section)."""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
import doc_sections  # noqa: E402
import kernels_report  # noqa: E402

BEGIN = "<!-- vs-pytorch:begin (scripts/bench_vs_pytorch.sh --doc writes this section) -->"
END = "<!-- vs-pytorch:end -->"
FIELDS = ("median_us", "p10_us", "p90_us", "baseline_median_us", "single_median_us",
          "overhead_us", "miss_us")


def load(res, who):
    """{(workload, name, ranks, bytes): row with FIELDS = the median over rounds}"""
    per = {}
    for path in sorted(glob.glob(os.path.join(res, f"{who}.r*.*.jsonl"))):
        workload = os.path.basename(path).split(".")[2]
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    key = (workload, r["name"], r.get("ranks", 1), r.get("bytes", 0))
                    per.setdefault(key, []).append(r)
    out = {}
    for key, rows in per.items():
        row = dict(rows[0])
        for f in FIELDS:
            vals = [r[f] for r in rows if r.get(f) is not None]
            row[f] = statistics.median(vals) if vals else None
        row["rounds"] = len(rows)
        row["correct"] = all(r.get("correct", True) for r in rows)
        out[key] = row
    return out


def fmt(v, scale=1.0, digits=1):
    return "-" if v is None else f"{v * scale:.{digits}f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def human_bytes(b):
    for unit, div in (("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= div:
            return f"{b / div:g} {unit}"
    return f"{b} B"


def rows_of(ours, torch, workload):
    """[(ours row, PyTorch row or None)] of a workload in ours' order of appearance."""
    return [(o, torch.get(k)) for k, o in ours.items() if k[0] == workload]


def dispatch_tables(ours, torch):
    pairs = [(o, t) for o, t in rows_of(ours, torch, "dispatch")
             if not o["name"].startswith("record ")]
    if not pairs:
        return []
    out = ["### Dispatch", "",
           "[8, 8] float32 on a 1-rank mesh, one process; per call. DTensor = the op on DTensors "
           "with the sharding already cached (plus `to_local()`); overhead = DTensor - the same op "
           "on the local tensors; miss = the op after clearing the sharding caches (PyTorch: its "
           "C++ fast-path cache and its Python LRU cache).", "",
           "| op | ours DTensor µs | ours overhead µs | PyTorch DTensor µs | PyTorch overhead µs "
           "| ours / PyTorch | ours miss µs | PyTorch miss µs |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for o, t in pairs:
        t = t or {}
        out.append(f"| `{o['name']}` | {fmt(o['median_us'], 1, 2)} | {fmt(o['overhead_us'], 1, 2)}"
                   f" | {fmt(t.get('median_us'), 1, 2)} | {fmt(t.get('overhead_us'), 1, 2)} | "
                   f"{ratio(o['median_us'], t.get('median_us'))} | {fmt(o.get('miss_us'))} | "
                   f"{fmt(t.get('miss_us'))} |")
    rec = [(o, t) for o, t in rows_of(ours, torch, "dispatch") if o["name"].startswith("record ")]
    if rec:
        out += ["", "Autograd recording (inputs that require grad vs not), overhead per op:", "",
                "| op | ours µs | PyTorch µs |", "|---|---:|---:|"]
        for o, t in rec:
            out.append(f"| `{o['name'][len('record '):]}` | {fmt(o['overhead_us'], 1, 2)} | "
                       f"{fmt((t or {}).get('overhead_us'), 1, 2)} |")
    return out + [""]


def redistribute_table(ours, torch):
    pairs = rows_of(ours, torch, "redistribute")
    if not pairs:
        return []
    out = ["### Redistribute", "",
           "float32, global [rows, 256]; median over iterations of the max over ranks. Beside each "
           "side's time, its time over the raw collective of its own backend on preallocated "
           "buffers (ours: the MPI collective; PyTorch: the gloo collective on the mesh dim's "
           "process group), timed interleaved in the same run.", "",
           "| transition | ranks | size | ours µs | PyTorch µs | ours / PyTorch | ours / MPI "
           "collective | PyTorch / gloo collective | check |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for o, t in pairs:
        t = t or {}
        ok = o["correct"] and t.get("correct", True)
        out.append(f"| `{o['name']}` | {o['ranks']} | {human_bytes(o['bytes'])} | "
                   f"{fmt(o['median_us'])} | {fmt(t.get('median_us'))} | "
                   f"{ratio(o['median_us'], t.get('median_us'))} | "
                   f"{ratio(o['median_us'], o.get('baseline_median_us'))} | "
                   f"{ratio(t.get('median_us'), t.get('baseline_median_us'))} | "
                   f"{'ok' if ok else 'WRONG'} |")
    return out + [""]


def step_table(ours, torch, workload, title, text, hand):
    pairs = rows_of(ours, torch, workload)
    if not pairs:
        return []
    out = [f"### {title}", "", text, "",
           f"| ranks | ours ms | PyTorch ms | ours / PyTorch | ours / hand-written {hand[0]} | "
           f"PyTorch / hand-written {hand[1]} | ours single-device ms | PyTorch single-device ms |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for o, t in sorted(pairs, key=lambda p: p[0]["ranks"]):
        t = t or {}
        out.append(f"| {o['ranks']} | {fmt(o['median_us'], 1e-3, 2)} | "
                   f"{fmt(t.get('median_us'), 1e-3, 2)} | "
                   f"{ratio(o['median_us'], t.get('median_us'))} | "
                   f"{ratio(o['median_us'], o.get('baseline_median_us'))} | "
                   f"{ratio(t.get('median_us'), t.get('baseline_median_us'))} | "
                   f"{fmt(o.get('single_median_us'), 1e-3, 2)} | "
                   f"{fmt(t.get('single_median_us'), 1e-3, 2)} |")
    return out + [""]


def torch_blas(res):
    """What PyTorch's CPU build runs its GEMMs with (torch_blas.txt, written by the script)."""
    path = os.path.join(res, "torch_blas.txt")
    return open(path).read().strip() if os.path.exists(path) else "not recorded"


def section(res, args):
    ours, torch = load(res, "ours"), load(res, "torch")
    version = next((r.get("torch") for r in torch.values()), "not run")
    ncpu = os.cpu_count() or 1
    # The machine's own load is the one before the run: the load after includes this run's
    # ranks (4 of them on a 2-core machine raise it past 2 by themselves).
    loads = [float(args.load_before.split()[0])] if args.load_before else []
    cmds_path = os.path.join(res, "commands.txt")
    cmds = open(cmds_path).read().rstrip() if os.path.exists(cmds_path) else ""
    failures_path = os.path.join(res, "failures.txt")
    failures = open(failures_path).read().rstrip() if os.path.exists(failures_path) else ""
    lines = [BEGIN, "## PyTorch DTensor side by side", "",
             "Generated by `scripts/bench_vs_pytorch.sh --doc` (not by scripts/bench.sh, which "
             "keeps this section as it is). Ours: the MPI programs above; PyTorch: the same workloads "
             f"written against PyTorch {version}'s public DTensor API "
             "(`benchmarks/pytorch/*_torch.py`), gloo backend, launched by torchrun. One compute "
             "thread per rank on both sides; ranks may outnumber cores (oversubscribed). "
             f"Each figure is the median over {args.rounds} round(s) that alternate ours and "
             "PyTorch's workload by workload. ours / PyTorch below 1: ours is faster.", "",
             f"- Date: {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')}",
             f"- CPU: {kernels_report.cpu_line()}",
             f"- GEMM: ours {kernels_report.gemm_line(res)}; PyTorch: {torch_blas(res)}",
             f"- Load average (1, 5, 15 min) before: {args.load_before}; after: "
             f"{args.load_after} ({args.seconds} s of benchmarks, whose own ranks raise it)"]
    if loads and max(loads) > 1:
        lines += ["", f"**Taken on a loaded machine** (load average {max(loads):.1f} before, on "
                  f"{ncpu} cores): both sides ran alternately under the same load, so the ratios "
                  "are the meaningful figures; absolute times are inflated. Rerun on a quiet "
                  "machine."]
    lines += ["", "Command:", "", "```", args.command, "```", "", "which ran, per round (with "
              "`OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1`):", "", "```", cmds,
              "```", ""]
    if failures:
        lines += ["**Runs that exited with an error:**", "", "```", failures, "```", ""]
    lines += dispatch_tables(ours, torch)
    lines += redistribute_table(ours, torch)
    lines += step_table(
        ours, torch, "tp", "Tensor-parallel transformer block forward",
        "RMSNorm, causal attention, SwiGLU; float32, dim 256, 8 heads, hidden 1024, seq 128, batch "
        "4 (unless the command says otherwise); Megatron plan (wq/wk/wv/w1/w3 colwise, wo/w2 "
        "rowwise). PyTorch: `parallelize_module` with ColwiseParallel / RowwiseParallel and their "
        "default layouts, so its attention, norms and residuals run on plain local tensors (as in "
        "PyTorch's tensor-parallel tutorial); ours runs every op as a DTensor op. Hand-written: "
        "the same math on the same shards with one all-reduce after wo and one after w2.",
        ("MPI", "gloo"))
    lines += step_table(
        ours, torch, "train", "Tensor-parallel training step",
        "Forward, backward and SGD (lr 1e-3) of 4 residual MLP blocks x + fc2(silu(fc1(x))) "
        "(biases; dim 256, hidden 1024, 512 tokens, float32; unless the command says otherwise), "
        "fc1 colwise and fc2 rowwise, loss = sum(y * w) / numel. PyTorch: `parallelize_module`, "
        "autograd and `torch.optim.SGD`. Hand-written: the step with gradients written out by "
        "hand, one all-reduce per block forward and one backward; every side checks that its "
        "hand-written weights equal its DTensor model's after the run.", ("MPI", "gloo"))
    return lines + [END]


def splice(path, lines):
    """Replaces the marked section of `path` with `lines` (appends it when there is none)."""
    doc_sections.splice(path, BEGIN, END, lines)


def keep_section(path):
    """The marked section of an existing `path` ("" when none), for make_report.py to carry
    over."""
    return doc_sections.keep(path, BEGIN, END)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--rounds", default="?")
    ap.add_argument("--load-before", default="")
    ap.add_argument("--load-after", default="")
    ap.add_argument("--seconds", default="?")
    ap.add_argument("--command", default="scripts/bench_vs_pytorch.sh --doc")
    args = ap.parse_args()
    lines = section(args.results, args)
    print("\n".join(lines[1:-1]))
    if args.out:
        splice(args.out, lines)
        print(f"wrote the PyTorch section of {args.out}")


if __name__ == "__main__":
    main()
