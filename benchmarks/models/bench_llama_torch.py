"""transformers' LlamaForCausalLM timed as bench_llama times models::Llama (issue 43 item 7):
eager CPU, one thread, float32, eager attention, the same configs, inputs and rows:
forward (inference mode), forward + backward (labels=input_ids, HF's loss) and greedy decode
with transformers' cache (generate(max_new_tokens=1) and generate(1 + new) interleaved, a decode
step their difference over `new`, batch 1, eos off).

    python bench_llama_torch.py [--config tiny|medium] [--dir tests/data/tiny_llama]
                                [--batch 2] [--seq S] [--prompt 16] [--new 64] [--iters 10]
                                [--warmup 2] [--decode 1] [--json FILE]

--json appends bench_llama's JSON records (same names and keys, "bench": "bench_llama_torch")
to FILE, for scripts/bench_models.sh's report.
"""
import argparse
import json
import os
import statistics
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

# bench_llama.cc's medium_config(), random weights.
MEDIUM = dict(vocab_size=1024, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
              num_attention_heads=8, num_key_value_heads=4, head_dim=64, rms_norm_eps=1e-5,
              rope_theta=10000.0, max_position_embeddings=256, tie_word_embeddings=False)


def pattern_ids(rows, cols, vocab):
    """(i * 7 + 3) % vocab over the flattened index, as bench_llama.cc."""
    return (torch.arange(rows * cols, dtype=torch.long) * 7 + 3).remainder(vocab).view(rows, cols)


def interleaved(fns, warmup, iters):
    """Median seconds of each function, run in turn each iteration (drift hits all alike)."""
    times = [[] for _ in fns]
    for it in range(warmup + iters):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            dt = time.perf_counter() - t0
            if it >= warmup:
                times[i].append(dt)
    return [statistics.median(t) for t in times]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=["tiny", "medium"], default="tiny")
    ap.add_argument("--dir", default=os.path.join(here, "..", "..", "tests", "data", "tiny_llama"))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--decode", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    tiny = a.config == "tiny"
    seq = a.seq or (12 if tiny else 64)
    if tiny:
        model = LlamaForCausalLM.from_pretrained(a.dir, dtype=torch.float32,
                                                 attn_implementation="eager")
    else:
        model = LlamaForCausalLM(LlamaConfig(**MEDIUM, attn_implementation="eager"))
    model = model.float().eval()  # eval: no dropout (there is none in a Llama: same numbers)
    vocab = model.config.vocab_size
    ids = pattern_ids(a.batch, seq, vocab)
    loss_value = [0.0]

    def forward():
        with torch.inference_mode():
            model(ids, use_cache=False)

    def forward_backward():
        model.zero_grad(set_to_none=True)
        loss = model(ids, labels=ids, use_cache=False).loss
        loss.backward()
        loss_value[0] = loss.item()

    fwd, fwdbwd = interleaved([forward, forward_backward], a.warmup, a.iters)
    print(f"# transformers {transformers.__version__} {a.config}: "
          f"{a.dir if tiny else 'random weights'}, float32, 1 thread; median of {a.iters} runs; "
          f"torch {torch.__version__}")
    print(f"forward            batch {a.batch} x {seq}  {fwd * 1e3:9.3f} ms")
    print(f"forward+backward   batch {a.batch} x {seq}  {fwdbwd * 1e3:9.3f} ms  "
          f"(loss {loss_value[0]:.4f})")
    header = dict(bench="bench_llama_torch", config=a.config, tp=1,
                  transformers=transformers.__version__, torch=torch.__version__)
    records = [dict(header, name=name, batch=a.batch, seq=seq, median_us=t * 1e6)
               for name, t in (("forward", fwd), ("forward_backward", fwdbwd))]
    if a.decode:
        records.append(decode(a, model, vocab, header))
    if a.json:
        with open(a.json, "a") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")


def decode(a, model, vocab, header):
    """Times greedy decode as decode_timing.h does; prints the row, returns its JSON record."""
    model.generation_config.eos_token_id = None
    prompt = pattern_ids(1, a.prompt, vocab)
    mask = torch.ones_like(prompt)
    outs = {}

    def gen(n):
        with torch.inference_mode():
            outs[n] = model.generate(prompt, attention_mask=mask, do_sample=False,
                                     max_new_tokens=n, min_new_tokens=n, pad_token_id=0)

    short, long = interleaved([lambda: gen(1), lambda: gen(1 + a.new)], a.warmup, a.iters)
    assert torch.equal(outs[1 + a.new][:, : a.prompt + 1], outs[1])
    step = (long - short) / a.new
    print(f"decode             prompt {a.prompt}, {a.new} new  {step * 1e3:9.3f} ms/token  "
          f"{1.0 / step:.1f} tokens/s (prefill+1 {short * 1e3:.3f} ms)")
    return dict(header, name="greedy_decode", prompt=a.prompt, new_tokens=a.new,
                prefill_ms=short * 1e3, decode_ms_per_token=step * 1e3, tokens_per_s=1.0 / step)


if __name__ == "__main__":
    main()
