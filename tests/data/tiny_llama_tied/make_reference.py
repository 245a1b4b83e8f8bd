#!/usr/bin/env python3
"""Makes tests/data/tiny_llama_tied/ (issue 43, R1 D): a tiny Llama with tie_word_embeddings,
saved by transformers' own save_pretrained (which leaves the tied lm_head.weight out of the
file), and transformers' logits for a fixed batch, so the suite checks that a tied Llama loads
strictly from it, from a file that also holds lm_head.weight, and that dtensor's save of it
round-trips; with --check DIR it instead loads DIR (a directory dtensor's save_hf wrote) with
transformers' from_pretrained and checks the logits against the committed reference (the
ctest hf_tied_save_transformers, where a Python with transformers is configured).

Run from the repository root, in a virtual environment outside the repository:
  /root/venv/bin/python tests/data/tiny_llama_tied/make_reference.py
  /root/venv/bin/python tests/data/tiny_llama_tied/make_reference.py --check DIR
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 4343


def make():
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=48,
                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, max_position_embeddings=32, rms_norm_eps=1e-5,
                         tie_word_embeddings=True, attn_implementation="eager",
                         torch_dtype="float32")
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(HERE, safe_serialization=True)
    saved = load_file(os.path.join(HERE, "model.safetensors"))
    assert "lm_head.weight" not in saved, "save_pretrained wrote the tied lm_head.weight"
    input_ids = torch.randint(0, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad():
        logits = model(input_ids).logits
    save_file({"input_ids": input_ids, "logits": logits.contiguous()},
              os.path.join(HERE, "reference.safetensors"), metadata={"format": "pt"})


def check(directory):
    ref = load_file(os.path.join(HERE, "reference.safetensors"))
    model = LlamaForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), \
        "transformers did not tie lm_head to the embedding"
    with torch.no_grad():
        logits = model(ref["input_ids"]).logits
    diff = (logits - ref["logits"]).abs().max().item()
    print(f"transformers loaded {directory}: tied, logits max abs diff {diff:.3g}")
    assert diff < 1e-5, diff


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        make()
