#!/usr/bin/env python3
"""Tables of the local-kernel benchmark: bench_kernels (ours) beside bench_kernels_torch.py
(PyTorch, same shapes, one thread), with the ratio and the issue-21 targets.

Inputs are JSON lines in a results folder: kernels_ours.r<N>[.<case>].jsonl and
kernels_torch.r<N>[.<case>].jsonl for round N (scripts/bench_kernels_vs_pytorch.sh runs the two
programs alternately case by case, so drifting machine load hits both alike). A kernel's figure
is the median over rounds of the per-round medians. Used by scripts/bench_kernels_vs_pytorch.sh (which writes docs/KERNELS.md)
and by benchmarks/make_report.py (the kernels section of docs/PERFORMANCE.md)."""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess

# The row order of the tables: bench_kernels.cc's order (the files are read in glob order).
ORDER = ["softmax", "log_softmax", "softmax_backward", "layer_norm", "rms_norm",
         "layer_norm_backward", "gelu", "gelu_tanh", "silu", "exp", "add", "attention",
         "attention_backward"]

# ours / PyTorch time, from issue 21.
TARGETS = {"softmax": 1.0, "layer_norm": 1.0}

# Why a figure is what it is, where the ratio alone would mislead.
NOTES = {
    "gelu": "erf form: ours evaluates its own vector erfc in float (dtensor/ops/common/detail/simd_math-inl.h "
            "ErfcFloat: 5.5 ulp, one exponential, one division and two short polynomials per "
            "vector, both branches evaluated); PyTorch's vectorised erf is a shorter polynomial "
            "approximation (measured with this PyTorch: relative error 4e-5 at x = -3, 4% at "
            "x = -5, 57% at x = -5.5, 0 instead of -5.9e-9 at x = -6), outside the 1e-6 float32 "
            "tolerance our tests hold gelu to",
}

def load_rounds(res, who):
    """{name: {"median_us": ..., "p10_us": ..., "p90_us": ..., "rounds": n, ...}}"""
    per = {}
    for path in sorted(glob.glob(os.path.join(res, f"kernels_{who}.r*.jsonl"))):
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    per.setdefault(r["name"], []).append(r)
    out = {}
    rank = lambda name: ORDER.index(name) if name in ORDER else len(ORDER)  # noqa: E731
    for name, rows in sorted(per.items(), key=lambda kv: (rank(kv[0]), kv[0])):
        row = dict(rows[0])
        for k in ("median_us", "p10_us", "p90_us"):
            row[k] = statistics.median(r[k] for r in rows)
        row["rounds"] = len(rows)
        row["correct"] = all(r.get("correct", True) for r in rows)
        out[name] = row
    return out


# Issue 40's GEMM targets: at least 0.9x torch.mm's speed at every shape, and 70% of the FMA
# peak for the large ones (every dim >= 1024).
GEMM_RATIO = 1 / 0.9
GEMM_PEAK = 0.70


def gemm_table(ours, torch):
    """Markdown lines for the mm_* rows: GFLOP/s beside torch.mm and the FMA peak."""
    rows = {k: v for k, v in ours.items() if k.startswith("mm_")}
    if not rows:
        return []
    f32 = [v for k, v in rows.items() if k.startswith("mm_f32")]
    bf16 = [v for k, v in rows.items() if k.startswith("mm_bf16")]
    first = f32[0] if f32 else next(iter(rows.values()))
    lines = ["| GEMM | [M, K, N] | ours GFLOP/s | % of peak | PyTorch GFLOP/s | ours / PyTorch "
             "time | targets | check |", "|---|---|---:|---:|---:|---:|---|---|"]
    for name, o in rows.items():
        t = torch.get(name)
        ratio = o["median_us"] / t["median_us"] if t else None
        frac = o["gflops"] / o["peak_gflops"] if o.get("peak_gflops") else None
        dims = [int(d) for d in name.split("_")[2].split("x")]
        tgt = [f"≤ {GEMM_RATIO:.2f}: " + ("met" if ratio is not None and ratio <= GEMM_RATIO
                                          else "**missed**" if ratio is not None else "n/a")]
        if min(dims) >= 1024 and frac is not None:
            tgt.append(f"≥ {GEMM_PEAK:.0%} peak: " + ("met" if frac >= GEMM_PEAK else "**missed**"))
        lines.append(
            f"| `{name}` | {o['shape']} | {o.get('gflops', 0):.1f} | "
            f"{f'{frac:.0%}' if frac is not None else '-'} | "
            f"{t.get('gflops', float('nan')) if t else float('nan'):.1f} | "
            f"{f'{ratio:.2f}' if ratio is not None else '-'} | {'; '.join(tgt)} | "
            f"{'ok' if o['correct'] else 'WRONG'} |")
    peak32 = first.get("peak_gflops")
    peak16 = bf16[0].get("peak_gflops") if bf16 else None
    bf16_peak = (f"the bf16 rows that of its bf16 dot products ({peak16:.1f} GFLOP/s; AVX-512 "
                 "BF16's vdpbf16ps: two bf16 products per float32 lane)"
                 if peak16 and peak16 != peak32 else "the bf16 rows the float32 peak")
    return lines + ["", f"FMA peak of one thread (float32): {peak32:.1f} GFLOP/s; float64 rows "
                    f"use the float64 peak, {bf16_peak}. bf16: dtensor runs oneDNN's bf16 GEMM "
                    "where the CPU has AVX-512 BF16, else widens to float32 and runs an sgemm "
                    "(the GEMM line above says which; DTENSOR_BF16_GEMM forces either); PyTorch "
                    "runs oneDNN's bf16 GEMM.", ""]


def table(ours, torch, status=None):
    """Markdown lines. status(name, ratio, target) -> cell text (default: met / missed).
    The mm_* rows are gemm_table's."""
    if status is None:
        status = lambda name, ratio, t: "met" if ratio <= t else (  # noqa: E731
            f"**missed by {(ratio / t - 1) * 100:.0f}%**")
    lines = ["| kernel | shape | ours µs (p10-p90) | PyTorch µs (p10-p90) | ours / PyTorch "
             "| target | check |", "|---|---|---:|---:|---:|---|---|"]
    for name, o in ours.items():
        if name.startswith("mm_"):
            continue
        t = torch.get(name)
        ratio = o["median_us"] / t["median_us"] if t else None
        tgt = ""
        if name in TARGETS:
            tgt = f"≤ {TARGETS[name]:g}: " + (status(name, ratio, TARGETS[name])
                                              if ratio is not None else "n/a (no PyTorch run)")
        torch_cell = (f"{t['median_us']:.1f} ({t['p10_us']:.1f}-{t['p90_us']:.1f})" if t
                      else "-")
        lines.append(
            f"| `{name}` | {o['shape']} | {o['median_us']:.1f} ({o['p10_us']:.1f}-"
            f"{o['p90_us']:.1f}) | {torch_cell} | {f'{ratio:.2f}' if ratio else '-'} | {tgt} | "
            f"{'ok' if o['correct'] else 'WRONG'} |")
    notes = [f"- `{k}`: {v}." for k, v in NOTES.items() if k in ours]
    return lines + ([""] + notes if notes else [])


def threads_table(res, one):
    """Markdown lines for the intra-op-thread runs (kernels_ours_t<N>.r1.jsonl and
    kernels_torch_t<N>.r1.jsonl, scripts/bench.sh): each kernel on N threads beside ours on one
    (`one`, load_rounds's result), and PyTorch on N threads when it ran. [] when none ran."""
    runs = sorted(glob.glob(os.path.join(res, "kernels_ours_t*.r1.jsonl")))
    if not runs:
        return []
    n = int(re.search(r"kernels_ours_t(\d+)\.r1", runs[0]).group(1))
    many = load_rounds(res, f"ours_t{n}")
    torch = load_rounds(res, f"torch_t{n}")
    lines = [f"### On {n} intra-op threads", "",
             f"The same kernels with `dtensor::set_num_threads({n})` "
             f"(`bench_kernels --threads {n}`; PyTorch: `torch.set_num_threads({n})`), each "
             "program alone on the machine. Off by default: with a rank on every core, threads "
             "only contend (dtensor/ops/threads.h). Results are the same bits as on one thread "
             "(`test_threads`).", "",
             f"| kernel | ours, 1 thread µs | ours, {n} threads µs (p10-p90) | speed-up "
             f"| PyTorch, {n} threads µs | ours / PyTorch | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name, m in many.items():
        o, t = one.get(name), torch.get(name)
        speed = f"{o['median_us'] / m['median_us']:.2f}x" if o else "-"
        torch_us = f"{t['median_us']:.1f}" if t else "-"
        ratio = f"{m['median_us'] / t['median_us']:.2f}" if t else "-"
        lines.append(f"| `{name}` | {o['median_us'] if o else float('nan'):.1f} | "
                     f"{m['median_us']:.1f} ({m['p10_us']:.1f}-{m['p90_us']:.1f}) | {speed} | "
                     f"{torch_us} | {ratio} | {'ok' if m['correct'] else 'WRONG'} |")
    if "attention" in many:
        lines += ["", "- `attention`, `attention_backward`: their GEMMs are OpenBLAS's (products of "
                  "128 x 128 x 32, where a second OpenBLAS thread gains little) and their block "
                  "passes split as short jobs; on this 2-core VM their 2-thread figures swung "
                  "between 0.9x and 2x the 1-thread time from run to run (PyTorch splits its "
                  "flash attention over batch and heads instead; not done here)."]
    return lines + [""]


def cpu_line():
    """CPU model, core count and the vector flags GEMM kernels depend on (lscpu)."""
    lscpu = subprocess.run("lscpu", shell=True, capture_output=True, text=True).stdout
    model = re.search(r"Model name:\s*(.*)", lscpu)
    found = re.search(r"Flags:\s*(.*)", lscpu)
    flags = set(found.group(1).split()) if found else set()
    wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16",
              "amx_tile"]
    return (f"{model.group(1).strip() if model else platform.processor()}, "
            f"{os.cpu_count()} logical cores, flags: "
            f"{' '.join(f for f in wanted if f in flags) or 'none of AVX2 / AVX-512'}")


def gemm_line(res):
    """The GEMM library and kernel bench_kernels reported (its '# GEMM:' header line)."""
    path = os.path.join(res, "kernels_gemm.txt")
    return open(path).read().strip() if os.path.exists(path) else "not recorded"


def describe(ours, torch):
    simd = next(iter(ours.values())).get("simd", "?") if ours else "?"
    tv = next(iter(torch.values())).get("torch", "?") if torch else "not run"
    rounds = max((o["rounds"] for o in ours.values()), default=0)
    return (f"float32, one thread each (PyTorch: `torch.set_num_threads(1)`, version {tv}; ours: "
            f"SIMD target {simd} chosen at run time). Per call: median over batches of 10 calls "
            f"(p10-p90 in brackets), then the median over {rounds} round(s) that alternate the two "
            "programs case by case; each call allocates its output in both. softmax, log_softmax, "
            "softmax_backward: [64, 4096] along the last dim; layer_norm (weight and bias), "
            "rms_norm (weight), layer_norm_backward (grad_x, grad_weight, grad_bias): [256, 1024]; "
            "gelu, gelu_tanh, silu, exp, add (two inputs): [256, 4096]; attention (causal, the fused forward: "
            "PyTorch's `scaled_dot_product_attention`) and attention_backward (grad_q, grad_k, "
            "grad_v from the forward's out and log-sum-exp: PyTorch's "
            "`_scaled_dot_product_flash_attention_for_cpu_backward`): [4, 8, 128, 32]. Every "
            "run of ours checks its result against float64.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--load-before", default="")
    ap.add_argument("--load-after", default="")
    ap.add_argument("--command", default="scripts/bench_kernels_vs_pytorch.sh --doc")
    args = ap.parse_args()
    ours, torch = load_rounds(args.results, "ours"), load_rounds(args.results, "torch")
    lines = table(ours, torch) + [""] + gemm_table(ours, torch)
    print("\n".join(lines))
    if not args.out:
        return
    cmds = ""
    cpath = os.path.join(args.results, "kernels_commands.txt")
    if os.path.exists(cpath):
        cmds = open(cpath).read().rstrip()
    # The benchmark keeps one core busy itself, so about 1 of the 1-minute load average after
    # the run is its own: the machine counts as loaded above 1 before or 2 after.
    before = float(args.load_before.split()[0]) if args.load_before else 0.0
    after = float(args.load_after.split()[0]) if args.load_after else 0.0
    loads = [before, after - 1.0]
    newest = max((os.path.getmtime(p) for p in glob.glob(os.path.join(args.results,
                                                                     "kernels_*.jsonl"))),
                 default=datetime.datetime.now().timestamp())
    run_time = datetime.datetime.utcfromtimestamp(newest)
    doc = [
        "# Local CPU kernels vs PyTorch",
        "",
        "Generated by `scripts/bench_kernels_vs_pytorch.sh --doc` (do not edit by hand: rerun",
        "the script). docs/PERFORMANCE.md's \"Local CPU kernels\" section (scripts/bench.sh) links",
        "here and shows one round of the same table when PyTorch is available to it.",
        "",
        f"- Date: {run_time.strftime('%Y-%m-%d %H:%M UTC')} (end of the run)",
        f"- CPU: {cpu_line()}; kernel {platform.release()}",
        f"- GEMM: {gemm_line(args.results)}",
        f"- Load average (1, 5, 15 min) before: {args.load_before}; after: {args.load_after}",
    ]
    if max(loads) > 1:
        doc += ["", f"**Taken on a loaded machine** (load average {before:.2f} before, "
                f"{after:.2f} after the run, on {os.cpu_count()} cores: other engineers' builds). "
                "Both sides ran alternately under the same load, so the ratios are the meaningful "
                "figures; absolute times are inflated."]
    else:
        doc += ["", "Quiet machine: load average below 1 before the run (the 1-minute figure "
                "after it includes the benchmark's own busy core)."]
    doc += ["", describe(ours, torch), "", "Command:", "", "```", args.command, "```", ""]
    if cmds:
        doc += ["which ran, per round:", "", "```", cmds, "```", ""]
    doc += lines + ["", "Before the vectorised kernels (issue 21's measurement, scalar loops): softmax "
                    "7.9x and layer_norm 7.1x PyTorch's time.", ""]
    with open(args.out, "w") as fh:
        fh.write("\n".join(doc))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
