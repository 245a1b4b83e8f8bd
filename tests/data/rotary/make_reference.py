# Generates tests/data/rotary/llama_rope_reference.safetensors (issue 43 review C):
#   /root/venv/bin/python tests/data/rotary/make_reference.py   (from the repository root;
#   transformers 5.24, torch 2.15, CPU). transformers' LlamaRotaryEmbedding's cos/sin (float32).
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

positions = torch.tensor([[0, 1, 7, 100, 1000, 2047, 3000, 4095]], dtype=torch.int64)
out = {"positions": positions[0].clone()}
cases = {
    "default": dict(rope_theta=500000.0),
    "llama3": dict(rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
}
for name, kw in cases.items():
    cfg = LlamaConfig(hidden_size=128 * 4, num_attention_heads=4, head_dim=128,
                      max_position_embeddings=131072, **kw)
    rope = LlamaRotaryEmbedding(cfg)
    x = torch.zeros(1, 1, dtype=torch.float32)
    cos, sin = rope(x, positions)
    out[f"{name}.inv_freq"] = rope.inv_freq.float().contiguous()
    out[f"{name}.cos"] = cos[0, :, :64].contiguous()  # the second half repeats the first
    out[f"{name}.sin"] = sin[0, :, :64].contiguous()
save_file(out, "tests/data/rotary/llama_rope_reference.safetensors")
print({k: tuple(v.shape) for k, v in out.items()})
