#!/usr/bin/env python3
"""The cases of bench_kernels.cc under PyTorch (CPU, one thread): same shapes, dtypes, per-call
timing (median / p10 / p90 over batches of --batch calls after a warm-up batch, at least 15
batches and --min-seconds). One JSON line per case, the fields bench_kernels writes.

Run by scripts/bench_kernels_vs_pytorch.sh with the virtual environment's python."""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def stats(fn, batch, min_seconds):
    for _ in range(batch):
        fn()
    per_call, total = [], 0.0
    while len(per_call) < 15 or total < min_seconds:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        s = time.perf_counter() - t0
        total += s
        per_call.append(s / batch)
    per_call.sort()
    pick = lambda q: per_call[min(len(per_call) - 1, int(q * len(per_call)))]  # noqa: E731
    return per_call[len(per_call) // 2], pick(0.1), pick(0.9)


def cases():
    g = torch.Generator().manual_seed(0)
    u = lambda shape, lo, hi: torch.rand(shape, generator=g) * (hi - lo) + lo  # noqa: E731
    xs, gs = u((64, 4096), -6, 6), u((64, 4096), -1, 1)
    xn, gn = u((256, 1024), -2, 3), u((256, 1024), -1, 1)
    w, b = u((1024,), 0.5, 1.5), u((1024,), -0.5, 0.5)
    xe, ye = u((256, 4096), -5, 5), u((256, 4096), -5, 5)
    aq, ak, av, ag = (u((4, 8, 128, 32), -1, 1) for _ in range(4))
    aout, alse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(aq, ak, av, 0.0, True)
    ys = torch.softmax(xs, -1)
    _, mean, rstd = torch.native_layer_norm(xn, (1024,), w, b, 1e-5)
    mask = [True, True, True]
    return [
        ("softmax", "[64, 4096]", lambda: torch.softmax(xs, -1)),
        ("log_softmax", "[64, 4096]", lambda: torch.log_softmax(xs, -1)),
        ("softmax_backward", "[64, 4096]",
         lambda: torch.ops.aten._softmax_backward_data(gs, ys, -1, torch.float32)),
        ("layer_norm", "[256, 1024]", lambda: F.layer_norm(xn, (1024,), w, b, 1e-5)),
        ("rms_norm", "[256, 1024]", lambda: F.rms_norm(xn, (1024,), w)),
        ("layer_norm_backward", "[256, 1024]",
         lambda: torch.ops.aten.native_layer_norm_backward(gn, xn, (1024,), mean, rstd, w, b,
                                                           mask)[0]),
        ("gelu", "[256, 4096]", lambda: F.gelu(xe)),
        ("gelu_tanh", "[256, 4096]", lambda: F.gelu(xe, approximate="tanh")),
        ("silu", "[256, 4096]", lambda: F.silu(xe)),
        ("exp", "[256, 4096]", lambda: torch.exp(xe)),
        ("add", "[256, 4096]", lambda: torch.add(xe, ye)),
        ("attention", "[4, 8, 128, 32]",
         lambda: F.scaled_dot_product_attention(aq, ak, av, is_causal=True)),
        ("attention_backward", "[4, 8, 128, 32]",
         lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
             ag, aq, ak, av, aout, alse, 0.0, True)[0]),
    ] + gemm_cases(u)


# bench_kernels.cc's GEMM rows: [M, K] @ [K, N] at tensor-parallel shard shapes.
GEMMS = [(128, 4096, 4096, "f32"), (512, 4096, 1024, "f32"), (512, 1024, 4096, "f32"),
         (2048, 2048, 2048, "f32"), (4096, 1024, 1024, "f32"), (1024, 4096, 512, "f32"),
         (2048, 256, 2048, "f32"), (512, 1024, 1024, "f64"), (2048, 2048, 2048, "f64"),
         (512, 4096, 1024, "bf16"), (2048, 2048, 2048, "bf16")]
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}


def gemm_cases(u):
    out = []
    for m, k, n, tag in GEMMS:
        a, b = u((m, k), -1, 1).to(DTYPES[tag]), u((k, n), -1, 1).to(DTYPES[tag])
        out.append((f"mm_{tag}_{m}x{k}x{n}", f"[{m}, {k}, {n}]",
                    (lambda a, b: lambda: torch.mm(a, b))(a, b), 2.0 * m * k * n))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--min-seconds", type=float, default=0.3)
    ap.add_argument("--only", default="", help="run this case only")
    ap.add_argument("--json", required=True)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with torch.no_grad(), open(args.json, "w") as out:
        for name, shape, fn, *flops in cases():
            if args.only and name != args.only:
                continue
            # GEMM rows: one call per batch, as bench_kernels times them.
            med, p10, p90 = stats(fn, 1 if flops else args.batch, args.min_seconds)
            row = {"bench": "bench_kernels_torch", "name": name, "shape": shape,
                   "dtype": name.split("_")[1] if flops else "float32",
                   "threads": torch.get_num_threads(), "torch": torch.__version__,
                   "median_us": med * 1e6, "p10_us": p10 * 1e6, "p90_us": p90 * 1e6}
            if flops:
                row["gflops"] = flops[0] / med / 1e9
            out.write(json.dumps(row) + "\n")
            print(f"{name:20s} {shape:12s} {med * 1e6:12.2f} {p10 * 1e6:12.2f} {p90 * 1e6:12.2f}")


if __name__ == "__main__":
    main()
