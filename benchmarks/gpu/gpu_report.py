#!/usr/bin/env python3
"""The "GPU" section of docs/PERFORMANCE.md, from a results folder of scripts/bench_gpu.sh (run on
a machine with a GPU): gpu.jsonl (bench_gpu, one rank), gpu_redist.jsonl (bench_gpu
--redistribute, ranks sharing the GPU), examples.log (tp_transformer and train_tp_transformer on
the CPU and with --cuda) and suite.txt (the gpu suite's summary lines); the why of each miss,
written after profiling, comes from benchmarks/gpu/notes.md (--notes). --out splices the section
between its markers (appended when absent); make_report.py carries it over."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import doc_sections  # noqa: E402

BEGIN = "<!-- gpu:begin (scripts/bench_gpu.sh writes this section on a GPU machine) -->"
END = "<!-- gpu:end -->"
BW_TARGET = 0.85    # elementwise / RNG / row kernels: fraction of the measured copy bandwidth
GEMM_TARGET = 0.95  # ours / cuBLAS called directly


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def text(path):
    return open(path).read().rstrip() if os.path.exists(path) else ""


def met(ok):
    return "met" if ok else "**missed**"


def section(res, args):
    rows = load(os.path.join(res, "gpu.jsonl"))
    redist = load(os.path.join(res, "gpu_redist.jsonl"))
    dev = next((r for r in rows if r["name"] == "device"), None)
    out = [BEGIN, "## GPU (CUDA)", ""]
    if dev is None:
        return out + ["(no GPU results)", "", END]
    drv, rt = dev["driver"], dev["runtime"]
    out += [
        f"Measured on {args.date} on {dev['gpu']} ({dev['sms']} SMs), driver CUDA "
        f"{drv // 1000}.{drv % 1000 // 10}, runtime {rt // 1000}.{rt % 1000 // 10}"
        + (f", {args.machine}" if args.machine else "") + ", built with "
        f"`-DDTENSOR_CUDA=ON` (CUDA architectures {args.arch}) by:", "",
        "```", args.command, "```", ""]
    suite = text(os.path.join(res, "suite.txt"))
    if suite:
        out += ["The gpu suite on that machine:", "", "```", suite, "```", ""]
    copy = next((r for r in rows if r["name"] == "copy"), None)
    if copy is None:
        return out + ["(bench_gpu stopped before measuring the copy bandwidth)", "", END]
    out += [
        f"### Bandwidth (float32, {copy['bytes'] / 2 / 2**20:.0f} MB per operand, one rank)", "",
        f"Against the device's own copy (`cudaMemcpy` device to device: "
        f"{copy['gbps']:.0f} GB/s counting bytes read and written). Target: >= {BW_TARGET:.2f} "
        "of it for elementwise ops and the RNG; softmax and layer_norm are listed beside it "
        "(each reads and writes the tensor once at best).", "",
        "| case | median | GB/s | of copy | target |", "|---|---|---|---|---|"]
    for r in rows:
        if "of_copy" not in r:
            continue
        target = r["name"] in ("clone", "add", "exp", "gelu", "uniform_", "normal_")
        out.append(f"| {r['name']} | {r['median_us']:.0f} us | {r['gbps']:.0f} | "
                   f"{r['of_copy']:.2f} | "
                   + (f"{met(r['of_copy'] >= BW_TARGET)} (>= {BW_TARGET})" if target else "-")
                   + " |")
    gem = [r for r in rows if r["name"].startswith("gemm ")]
    if gem:
        out += ["", f"### GEMM ({gem[0]['g']}^3, ours `dt::mm` vs `cublasGemmEx` on the same "
                "operands and math mode)", "",
                "| dtype | ours TFLOP/s | cuBLAS TFLOP/s | ratio | target |",
                "|---|---|---|---|---|"]
        for r in gem:
            out.append(f"| {r['name'][5:]} | {r['tflops']:.1f} | {r['cublas_tflops']:.1f} | "
                       f"{r['ratio']:.3f} | {met(r['ratio'] >= GEMM_TARGET)} (>= {GEMM_TARGET}) |")
    if redist:
        out += ["", f"### Redistribute through MPI staging ({redist[0]['ranks']} ranks sharing "
                "the GPU, `DTENSOR_CUDA_BACKEND=mpi`)", "",
                "Against one device-to-device copy of the output's bytes (what a single GPU "
                "would need at least). A single GPU cannot host several NCCL ranks: multi-rank "
                "NCCL stays to be measured on a multi-GPU machine.", "",
                "| move | MB out | ours | D2D copy | ratio |", "|---|---|---|---|---|"]
        for r in redist:
            out.append(f"| {r['name'][13:]} | {r['mb']} | {r['median_us']:.0f} us | "
                       f"{r['copy_median_us']:.0f} us | {r['ratio']:.1f}x |")
    notes = text(args.notes)
    if notes:
        out += ["", "### Why (misses and observations)", "", notes]
    ex = text(os.path.join(res, "examples.log"))
    if ex:
        out += ["", "### Examples on the CPU and with --cuda", "",
                "The tensor-parallel model's forward (`tp_transformer`, CPU with "
                "OPENBLAS_NUM_THREADS=16) and the training example (`train_tp_transformer`, "
                "defaults):", "", "```", ex, "```"]
    return out + ["", END]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--date", default="?")
    ap.add_argument("--machine", default="")
    ap.add_argument("--command", default="scripts/bench_gpu.sh --doc")
    ap.add_argument("--arch", default="?")
    ap.add_argument("--notes", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "notes.md"))
    args = ap.parse_args()
    lines = section(args.results, args)
    print("\n".join(lines[1:-1]))
    if args.out:
        doc_sections.splice(args.out, BEGIN, END, lines)
        print(f"wrote the GPU section of {args.out}")


if __name__ == "__main__":
    main()
