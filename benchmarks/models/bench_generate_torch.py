"""transformers' greedy generate on a Hugging Face directory, timed as bench_generate times
models::generate (issue 43 item 7): one thread, batch 1, float32, eager attention; the median
of generate(max_new_tokens=1) and generate(max_new_tokens=1 + new), interleaved; a decode step
is their difference over `new`. eos is switched off so every run makes all its tokens.

    python bench_generate_torch.py [--dir tests/data/tiny_llama] [--prompt 16] [--new 32]
                                   [--iters 5] [--warmup 1]
"""
import argparse
import os
import statistics
import time

import torch
from transformers import LlamaForCausalLM


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(here, "..", "..", "tests", "data", "tiny_llama"))
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = LlamaForCausalLM.from_pretrained(a.dir, torch_dtype=torch.float32,
                                             attn_implementation="eager").eval()
    model.generation_config.eos_token_id = None
    vocab = model.config.vocab_size
    prompt = torch.tensor([[(i * 7 + 3) % vocab for i in range(a.prompt)]], dtype=torch.long)
    mask = torch.ones_like(prompt)

    def gen(n):
        with torch.inference_mode():
            return model.generate(prompt, attention_mask=mask, do_sample=False, max_new_tokens=n,
                                  min_new_tokens=n, pad_token_id=0)

    times = {1: [], 1 + a.new: []}
    outs = {}
    for it in range(a.warmup + a.iters):
        for n in times:
            t0 = time.perf_counter()
            outs[n] = gen(n)
            dt = time.perf_counter() - t0
            if it >= a.warmup:
                times[n].append(dt)
    assert torch.equal(outs[1 + a.new][:, : a.prompt + 1], outs[1])
    short, long = statistics.median(times[1]), statistics.median(times[1 + a.new])
    step = (long - short) / a.new
    print(f"# transformers {__import__('transformers').__version__} generate: {a.dir}, prompt "
          f"{a.prompt}, {a.new} decode steps, batch 1, float32, 1 thread; median of {a.iters}")
    print(f"prefill+1 {short * 1e3:.3f} ms  decode {step * 1e3:.3f} ms/token  "
          f"{1.0 / step:.1f} tokens/s")
    print("tokens", outs[1 + a.new][0].tolist())


if __name__ == "__main__":
    main()
