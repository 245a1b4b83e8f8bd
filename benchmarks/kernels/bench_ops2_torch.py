#!/usr/bin/env python3
"""The cases of bench_ops2.cc under PyTorch (CPU, float32, one thread), side by side.

    env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        /root/venv/bin/python benchmarks/kernels/bench_ops2_torch.py \
        --dtensor build/benchmarks/kernels/bench_ops2 [--min-seconds 0.4] [--only SUBSTRING] \
        [--pairs N] [--halo-ranks 2] [--doc docs/PERFORMANCE.md]

Runs bench_ops2 (when --dtensor is given), then the same ops with torch (forward under
torch.no_grad(); forward + backward with the output's backward(ones), the inputs' gradients
cleared before each run), and prints one row per case: dtensor ms, PyTorch ms, ratio
(dtensor / PyTorch; the target is <= 1.0). Medians over runs filling --min-seconds.
--pairs N: N such pairs in turn (the machine's speed drifts between a whole run of ours and a
whole run of PyTorch's): the medians over the pairs, the median of the per-pair ratios and
their range.
--halo-ranks N (with --dtensor): also `mpiexec -np N bench_ops2 --halo` (a height-sharded conv,
halo exchange vs gather). --doc PATH: writes the "Op coverage II" section of PATH (between its
markers, kept by make_report.py) with the machine, the load average before and after, the
command, and --notes (default bench_ops2_notes.md beside this script: the misses explained).
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import doc_sections  # noqa: E402

BEGIN = "<!-- ops2:begin (benchmarks/kernels/bench_ops2_torch.py --doc writes this section) -->"
END = "<!-- ops2:end -->"
MPIEXEC = ["mpiexec", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca",
           "btl_vader_single_copy_mechanism", "none"]


def median_ms(fn, min_seconds):
    fn()  # warm-up
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    n = int(min(200, max(5, min_seconds / one)))
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2] * 1e3


def leaf(shape, seed, grad, lo=-1.0, hi=1.0):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g) * (hi - lo) + lo
    return t.requires_grad_(grad)


def cases():
    out = []
    for name, n, cin, hw, cout, k, s, p in [
        ("conv2d 8x64x56x56 k3 64", 8, 64, 56, 64, 3, 1, 1),
        ("conv2d 8x128x28x28 k3 128", 8, 128, 28, 128, 3, 1, 1),
        ("conv2d 8x128x28x28 k3 s2 256", 8, 128, 28, 256, 3, 2, 1),
        ("conv2d 8x256x14x14 k1 1024", 8, 256, 14, 1024, 1, 1, 0),
    ]:
        x = leaf((n, cin, hw, hw), 1, True)
        b = 1.0 / (cin * k * k) ** 0.5
        w = leaf((cout, cin, k, k), 2, True, -b, b)
        out.append((name, lambda x=x, w=w, s=s, p=p: F.conv2d(x, w, None, s, p), [x, w]))
    x = leaf((8, 64, 56, 56), 3, True)
    w, bias = leaf((64,), 4, True), leaf((64,), 5, True)
    rm, rv = torch.zeros(64), torch.ones(64)
    out.append(("batch_norm 8x64x56x56 train",
                lambda: F.batch_norm(x, rm, rv, w, bias, True), [x, w, bias]))
    out.append(("group_norm 8x64x56x56 g32", lambda: F.group_norm(x, 32, w, bias), [x, w, bias]))
    x2 = leaf((8, 64, 56, 56), 6, True)
    out.append(("max_pool2d 8x64x56x56 k3 s2 p1", lambda: F.max_pool2d(x2, 3, 2, 1), [x2]))
    out.append(("avg_pool2d 8x64x56x56 k2 s2", lambda: F.avg_pool2d(x2, 2, 2), [x2]))
    y = leaf((8, 64, 28, 28), 7, True)
    out.append(("interpolate 8x64x28x28 nearest x2",
                lambda: F.interpolate(y, scale_factor=2.0, mode="nearest"), [y]))
    out.append(("interpolate 8x64x28x28 bilinear x2",
                lambda: F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False),
                [y]))
    inp = leaf((256, 4096), 8, True)
    tg = leaf((256, 4096), 9, False)
    prob = leaf((256, 4096), 10, False, 0.01, 1.0)
    out.append(("mse_loss 256x4096", lambda: F.mse_loss(inp, tg), [inp]))
    out.append(("l1_loss 256x4096", lambda: F.l1_loss(inp, tg), [inp]))
    out.append(("smooth_l1_loss 256x4096", lambda: F.smooth_l1_loss(inp, tg), [inp]))
    out.append(("bce_with_logits 256x4096",
                lambda: F.binary_cross_entropy_with_logits(inp, prob), [inp]))
    out.append(("kl_div 256x4096 batchmean",
                lambda: F.kl_div(inp, prob, reduction="batchmean"), [inp]))
    logits = leaf((4096, 1000), 11, True, -3, 3)
    target = torch.randint(0, 1000, (4096,), generator=torch.Generator().manual_seed(12))
    out.append(("cross_entropy 4096x1000", lambda: F.cross_entropy(logits, target), [logits]))
    out.append(("nll_loss 4096x1000", lambda: F.nll_loss(logits, target), [logits]))
    weight = leaf((1000,), 13, False, 0.5, 1.5)
    out.append(("cross_entropy 4096x1000 weight ls0.1",
                lambda: F.cross_entropy(logits, target, weight=weight, label_smoothing=0.1),
                [logits]))
    probs = leaf((4096, 1000), 14, False, 0.0, 1.0)
    out.append(("cross_entropy 4096x1000 probs", lambda: F.cross_entropy(logits, probs),
                [logits]))
    return out


def load():
    return open("/proc/loadavg").read().split()[0]


def cpu_model():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "?"


def run_ours(a):
    """bench_ops2's medians: {(case, pass): ms}."""
    ours = {}
    cmd = [a.dtensor, "--min-seconds", str(a.min_seconds)]
    if a.only:
        cmd += ["--only", a.only]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in text.splitlines():
        m = re.match(r"^(.{40}) (\S+)\s+([\d.]+) ms", line)
        if m:
            ours[(m.group(1).strip(), m.group(2))] = float(m.group(3))
    return ours


def run_theirs(a):
    """PyTorch's medians of the same cases: [(case, pass, ms)] in bench order."""
    out = []
    for name, fn, leaves in cases():
        if a.only and a.only not in name:
            continue

        def fwd(fn=fn):
            with torch.no_grad():
                fn()

        with torch.no_grad():
            g = torch.ones_like(fn())

        def fwd_bwd(fn=fn, leaves=leaves, g=g):
            for t in leaves:
                t.grad = None
            fn().backward(g)

        for label, f in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
            out.append((name, label, median_ms(f, a.min_seconds)))
    return out


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtensor", help="path of bench_ops2 (run first, side by side)")
    ap.add_argument("--min-seconds", type=float, default=0.4)
    ap.add_argument("--only", default="")
    ap.add_argument("--pairs", type=int, default=1,
                    help="runs of (bench_ops2, then PyTorch), in turn; the ratio is the median "
                         "of the per-pair ratios, printed with their range")
    ap.add_argument("--halo-ranks", type=int, default=0)
    ap.add_argument("--doc", default="")
    ap.add_argument("--notes", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "bench_ops2_notes.md"),
                    help="markdown written under 'Why (misses and observations)' with --doc")
    a = ap.parse_args()
    torch.set_num_threads(1)
    load_before = load()
    mine_runs, theirs_runs = {}, {}  # (case, pass) -> ms per pair
    order = []
    for _ in range(max(1, a.pairs)):
        ours = run_ours(a) if a.dtensor else {}
        for name, label, ms in run_theirs(a):
            if (name, label) not in theirs_runs:
                order.append((name, label))
            theirs_runs.setdefault((name, label), []).append(ms)
            if (name, label) in ours:
                mine_runs.setdefault((name, label), []).append(ours[(name, label)])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{max(1, a.pairs)} pair(s)")
    print(f"{'case':40} {'pass':8} {'dtensor ms':>11} {'PyTorch ms':>11} {'ratio':>7}")
    rows = []
    for key in order:
        name, label = key
        theirs = median(theirs_runs[key])
        mine = median(mine_runs[key]) if key in mine_runs else None
        ratios = [m / t for m, t in zip(mine_runs.get(key, []), theirs_runs[key])]
        rows.append((name, label, mine, theirs, ratios))
        ratio = f"{median(ratios):7.2f}" if ratios else "      -"
        spread = f"  [{min(ratios):.2f}, {max(ratios):.2f}]" if len(ratios) > 1 else ""
        mine_s = f"{mine:11.3f}" if mine is not None else "          -"
        print(f"{name:40} {label:8} {mine_s} {theirs:11.3f} {ratio}{spread}", flush=True)
    halo = []
    if a.dtensor and a.halo_ranks > 0:
        cmd = MPIEXEC + ["-np", str(a.halo_ranks), a.dtensor, "--halo", "--min-seconds", "1"]
        halo = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
        print("\n".join(halo))
    load_after = load()
    if a.doc:
        write_doc(a, rows, halo, load_before, load_after)


def write_doc(a, rows, halo, load_before, load_after):
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    busy = max(float(load_before), float(load_after)) > 1.0
    out = [BEGIN, "## Op coverage II", ""]
    out.append(
        f"Issue 44's vision ops and losses beside PyTorch {torch.__version__} on the same machine "
        f"({date}; CPU: {cpu_model()}, {os.cpu_count()} logical cores; load average "
        f"{load_before} before, {load_after} after"
        + ("; the machine is shared with other jobs, so these figures are provisional" if busy
           else "") + "). float32, one thread each (`OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`, "
        "`torch.set_num_threads(1)`, OPENBLAS_CORETYPE unset); ours through the user's path "
        "(DTensor ops on local DTensors, autograd recording), PyTorch through "
        "`torch.nn.functional`. fwd: the forward without recording (`torch.no_grad()`); "
        "fwd+bwd: the forward, then `backward(ones)` into every input that requires grad "
        "(convolutions: input and weight; norms: input, weight, bias; losses: the input). "
        "Median ms over runs filling " + f"{a.min_seconds:g} s"
        + (f"; {a.pairs} pairs (ours, then PyTorch, in turn): ms the medians over the pairs, "
           "the ratio the median of the per-pair ratios [their range]" if a.pairs > 1 else "")
        + ". Command:")
    out += ["", "```",
            "env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\",
            "  /root/venv/bin/python benchmarks/kernels/bench_ops2_torch.py \\",
            f"  --dtensor build/benchmarks/kernels/bench_ops2 --halo-ranks {a.halo_ranks} "
            + (f"--pairs {a.pairs} " if a.pairs > 1 else "") + "--doc docs/PERFORMANCE.md",
            "```", ""]
    out += ["| op | shape | pass | ours ms | PyTorch ms | ours / PyTorch | target ≤ 1.0 |",
            "|---|---|---|---:|---:|---:|---|"]
    for name, label, mine, theirs, ratios in rows:
        op, shape = name.split(" ", 1)
        if mine is None:
            out.append(f"| `{op}` | {shape} | {label} | - | {theirs:.3f} | - | - |")
            continue
        r = median(ratios)
        spread = f" [{min(ratios):.2f}, {max(ratios):.2f}]" if len(ratios) > 1 else ""
        out.append(f"| `{op}` | {shape} | {label} | {mine:.3f} | {theirs:.3f} | {r:.2f}{spread} | "
                   + ("met" if r <= 1.0 else "missed") + " |")
    if halo:
        out += ["", "Height-sharded convolution (`mpiexec -np "
                f"{a.halo_ranks} bench_ops2 --halo`): the conv op on a Shard(2) input (halo "
                "exchange: the edge rows sent point to point to the neighbours in forward, their "
                "gradients sent back in backward) vs gathering the height first (redistribute to "
                "Replicate, "
                "conv, back to Shard(2)); runs interleaved, each the max over ranks, median ms "
                "(p10, p90). The ranks share the 2 cores with each other and the machine's other "
                "jobs.", "", "```"] + halo + ["```"]
    if a.notes and os.path.exists(a.notes):
        out += ["", "### Why (misses and observations)", "",
                f"(From {os.path.relpath(a.notes)}, written by hand from the runs of "
                "2026-11-27; the ratios it quotes are ranges over those runs.)", "",
                open(a.notes).read().rstrip()]
    out += ["", END]
    doc_sections.splice(a.doc, BEGIN, END, out)
    print(f"wrote the Op coverage II section of {a.doc}")


if __name__ == "__main__":
    main()
