#!/usr/bin/env python3
"""Makes tests/data/tiny_llama/: a tiny Llama checkpoint written by transformers itself and the
reference values dtensor is checked against (issue 43).

The checkpoint is LlamaForCausalLM(config) with transformers' own random initialisation under
torch.manual_seed(SEED), saved by save_pretrained(safe_serialization=True) in float32, so
the directory is exactly what a user downloads from the Hub, only smaller (config.json,
generation_config.json, model.safetensors). reference.safetensors holds what transformers
computes with it, eager attention, float32:

  input_ids       int64   [2, 12]           a fixed random batch
  logits          float32 [2, 12, 256]      model(input_ids).logits
  loss            float32 []                model(input_ids, labels=input_ids).loss (HF shifts)
  grad.<name>     float32 like the param    d loss / d param, for every named parameter
  greedy.prompt   int64   [1, 5]
  greedy.tokens   int64   [1, 13]           generate(greedy.prompt, do_sample=False,
                                            max_new_tokens=8): prompt + 8 new tokens

It also writes tests/data/hf_dtypes/model.safetensors: one float32 tensor as "f32.weight" and
PyTorch's own conversions of it as "bf16.weight" and "f16.weight" (round to nearest even,
f16 overflow to inf), the oracle for dtensor's dtype conversions on load and save.

Run in a virtual environment outside the repository (transformers and safetensors are not
dependencies of dtensor; the suite reads these files with its own reader):
  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch transformers safetensors
  /tmp/venv/bin/python scripts/make_tiny_llama.py [OUT_DIR]   (default tests/data/tiny_llama;
                                                      hf_dtypes/ goes beside it)
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 43  # the issue number; any fixed value works
BATCH, SEQ = 2, 12
PROMPT_LEN, NEW_TOKENS = 5, 8


def make_config():
    return LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=10000.0,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attn_implementation="eager",
        torch_dtype="float32",
    )


def greedy_margin(model, tokens, prompt_len):
    """Smallest gap between the best and second-best logit over the greedy steps: how far a
    reimplementation's rounding may move the logits before a greedy token could change."""
    with torch.no_grad():
        logits = model(tokens).logits[0, prompt_len - 1 : -1]
    top2 = logits.topk(2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).min().item()


def write_dtypes(out):
    """A float32 tensor with values that round (to bf16 and f16 differently), overflow f16 and
    underflow it, and PyTorch's conversions of it."""
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(4, 8, generator=gen, dtype=torch.float32) * 3
    x[0, :6] = torch.tensor([1 + 2**-8, 1 + 3 * 2**-9, 98256.0, 1e-8, -2.5e-5, 65519.0])
    os.makedirs(out, exist_ok=True)
    save_file({"f32.weight": x, "bf16.weight": x.to(torch.bfloat16), "f16.weight": x.to(torch.float16)},
              os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo, "tests", "data", "tiny_llama")
    os.makedirs(out, exist_ok=True)

    torch.manual_seed(SEED)
    model = LlamaForCausalLM(make_config()).to(torch.float32)
    model.config.use_cache = True
    model.save_pretrained(out, safe_serialization=True)

    # The inputs come from their own generator so that they do not depend on how many random
    # numbers the initialisation drew (a transformers release may draw differently).
    gen = torch.Generator().manual_seed(SEED)
    input_ids = torch.randint(0, 256, (BATCH, SEQ), generator=gen, dtype=torch.int64)
    prompt = torch.randint(3, 256, (1, PROMPT_LEN), generator=gen, dtype=torch.int64)

    model.train(False)
    out_fw = model(input_ids, labels=input_ids)
    out_fw.loss.backward()
    ref = {
        "input_ids": input_ids,
        "logits": out_fw.logits.detach().contiguous(),
        "loss": out_fw.loss.detach().reshape(()).contiguous(),
    }
    for name, p in model.named_parameters():
        ref["grad." + name] = p.grad.detach().contiguous()

    with torch.no_grad():
        tokens = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=NEW_TOKENS,
            pad_token_id=0,
        )
    # A random model may emit the eos id (2) and stop early; the reference wants all 8 tokens.
    assert tokens.shape == (1, PROMPT_LEN + NEW_TOKENS), tokens.shape
    ref["greedy.prompt"] = prompt
    ref["greedy.tokens"] = tokens.contiguous()
    save_file(ref, os.path.join(out, "reference.safetensors"), metadata={"format": "pt"})

    write_dtypes(os.path.join(os.path.dirname(os.path.abspath(out)), "hf_dtypes"))
    print(f"wrote {out}: loss {ref['loss'].item():.6f}, greedy tokens {tokens.tolist()}, "
          f"smallest greedy logit margin {greedy_margin(model, tokens, PROMPT_LEN):.3e}")


if __name__ == "__main__":
    main()
