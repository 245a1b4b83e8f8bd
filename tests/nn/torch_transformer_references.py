"""PyTorch's MultiheadAttention / TransformerEncoderLayer / TransformerEncoder values that
tests/nn/test_transformer_modules.cc compares with (round 9, helper MHA).

Run from the repository root: /root/venv/bin/python tests/nn/torch_transformer_references.py
(torch 2.15.0, CPU, float64). Writes tests/data/nn/transformer_reference.txt, one tensor a line:
  <name> <f64|bool> <d0,d1,..> <values...>
Each case <c> holds its inputs (c.query, c.key, c.value or c.src; masks c.attn_mask,
c.key_padding_mask / c.src_mask, c.src_key_padding_mask), its parameters by PyTorch's names
(c.param.<name>, det_input values, not PyTorch's random init), the loss weights (c.cout,
c.cweights), PyTorch's outputs (c.out, c.weights) and the gradients of
loss = sum(out * cout) [+ sum(weights * cweights)] w.r.t. the inputs (c.grad.query, ...) and every
parameter (c.grad.param.<name>). Modules in eval (dropout off), grad mode on (the slow path).
"""
import torch

torch.set_default_dtype(torch.float64)
nn = torch.nn
lines = []


def det_input(shape, salt=0, lo=-1.0, step=0.2):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([lo + step * ((i * 7 + salt) % 11) for i in range(n)]).reshape(shape)


def put(name, t):
    t = t.detach()
    kind = "bool" if t.dtype == torch.bool else "f64"
    vals = [str(int(v)) for v in t.flatten().tolist()] if kind == "bool" else \
        ["%.17g" % v for v in t.flatten().tolist()]
    shape = ",".join(str(s) for s in t.shape) if t.dim() > 0 else "-"
    lines.append(" ".join([name, kind, shape] + vals))


def load_params(case, m):
    with torch.no_grad():
        for i, (name, p) in enumerate(m.named_parameters()):
            p.copy_(det_input(list(p.shape), 3 + i, -0.6, 0.13) * (1.5 if "bias" in name else 1.0))
            put("%s.param.%s" % (case, name), p)


def finish(case, m, inputs, out, weights=None):
    put(case + ".out", out)
    cout = det_input(list(out.shape), 5, -1.0, 0.25)
    put(case + ".cout", cout)
    loss = (out * cout).sum()
    if weights is not None:
        put(case + ".weights", weights)
        cw = det_input(list(weights.shape), 6, -1.0, 0.3)
        put(case + ".cweights", cw)
        loss = loss + (weights * cw).sum()
    loss.backward()
    for name, t in inputs.items():
        put("%s.grad.%s" % (case, name), t.grad)
    for name, p in m.named_parameters():
        put("%s.grad.param.%s" % (case, name), p.grad)


def leaf(case, name, shape, salt):
    t = det_input(shape, salt, -1.5, 0.3).requires_grad_()
    put("%s.%s" % (case, name), t)
    return t


def mask(case, name, t):
    put("%s.%s" % (case, name), t)
    return t


L, S, N, E, H = 3, 4, 2, 4, 2
# A bool attn mask that leaves every row a key (true: not allowed), a padding mask likewise.
bool_mask2 = torch.tensor([[False, True, False, True], [True, False, False, False],
                           [False, False, True, True]])
bool_kpm = torch.tensor([[False, False, True, False], [True, False, False, True]])
float_mask3 = det_input([N * H, L, S], 2, -1.0, 0.35)
# Padding masks that leave key 0 (the only key of a causal row 0) to every row.
causal_kpm = torch.tensor([[False, True, False], [False, False, True]])
float_kpm = torch.tensor([[0.0, -0.5, 0.25, -float("inf")], [0.5, 0.0, -1.0, 0.0]])

# (case, MultiheadAttention kwargs, query/key/value shapes (None: self-attention), forward kwargs)
mha_cases = [
    ("mha_self_weights", dict(), None, dict()),
    ("mha_self_sdpa_bool", dict(), None,
     dict(attn_mask=bool_mask2[:, :3], key_padding_mask=bool_kpm[:, :3], need_weights=False)),
    ("mha_cross_kvdim", dict(kdim=5, vdim=3), ([L, N, E], [S, N, 5], [S, N, 3]),
     dict(attn_mask=float_mask3, need_weights=True, average_attn_weights=False)),
    ("mha_cross_kvdim_sdpa", dict(kdim=5, vdim=3), ([L, N, E], [S, N, 5], [S, N, 3]),
     dict(attn_mask=float_mask3, key_padding_mask=bool_kpm, need_weights=False)),
    ("mha_bias_kv_zero_attn", dict(add_bias_kv=True, add_zero_attn=True), ([L, N, E], [S, N, E],
                                                                          [S, N, E]),
     dict(attn_mask=float_mask3[0], key_padding_mask=float_kpm)),
    ("mha_bias_kv_zero_attn_sdpa", dict(add_bias_kv=True, add_zero_attn=True),
     ([L, N, E], [S, N, E], [S, N, E]),
     dict(attn_mask=bool_mask2.repeat(N * H, 1, 1), need_weights=False)),
    ("mha_batch_first_causal", dict(batch_first=True), None,
     dict(attn_mask=nn.Transformer.generate_square_subsequent_mask(L), is_causal=True,
          need_weights=False)),
    ("mha_causal_kpm", dict(bias=False), None,
     dict(attn_mask=nn.Transformer.generate_square_subsequent_mask(L), is_causal=True,
          key_padding_mask=causal_kpm, need_weights=False)),
    ("mha_unbatched", dict(kdim=5, vdim=5), ([L, E], [S, 5], [S, 5]),
     dict(attn_mask=float_mask3[:H], key_padding_mask=bool_kpm[1], average_attn_weights=False)),
]
for case, kw, shapes, fkw in mha_cases:
    m = nn.MultiheadAttention(E, H, **kw).eval()
    load_params(case, m)
    if shapes is None:
        shape = [N, L, E] if kw.get("batch_first") else [L, N, E]
        x = leaf(case, "query", shape, 1)
        inputs = {"query": x}
        q = k = v = x
    else:
        q, k, v = (leaf(case, n, s, salt) for n, s, salt in zip(("query", "key", "value"),
                                                                 shapes, (1, 2, 4)))
        inputs = {"query": q, "key": k, "value": v}
    for name in ("attn_mask", "key_padding_mask"):
        if name in fkw:
            mask(case, name, fkw[name])
    out, weights = m(q, k, v, **fkw)
    finish(case, m, inputs, out, weights)

# TransformerEncoderLayer(d_model 4, nhead 2, dim_feedforward 6), eval.
enc_cases = [
    ("enc_post_relu", dict(), dict(src_mask=bool_mask2[:, :3], src_key_padding_mask=bool_kpm[:, :3])),
    ("enc_pre_gelu_bf", dict(norm_first=True, activation="gelu", batch_first=True),
     dict(src_mask=float_mask3[:, :, :3])),
    ("enc_pre_nobias_causal", dict(norm_first=True, bias=False),
     dict(src_mask=nn.Transformer.generate_square_subsequent_mask(L), is_causal=True)),
]
for case, kw, fkw in enc_cases:
    m = nn.TransformerEncoderLayer(E, H, 6, **kw).eval()
    load_params(case, m)
    x = leaf(case, "src", [N, L, E] if kw.get("batch_first") else [L, N, E], 1)
    for name in ("src_mask", "src_key_padding_mask"):
        if name in fkw:
            mask(case, name, fkw[name])
    finish(case, m, {"src": x}, m(x, **fkw))

# TransformerEncoder: 2 post-norm relu layers (each loaded with its own values) and a final
# LayerNorm; causal mask with the hint and a padding mask.
case = "encoder2"
m = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 6), 2, norm=nn.LayerNorm(E),
                          enable_nested_tensor=False).eval()
print("TransformerEncoder keys", [n for n, _ in m.named_parameters()][:3], "...")
load_params(case, m)
x = leaf(case, "src", [L, N, E], 1)
fkw = dict(mask=nn.Transformer.generate_square_subsequent_mask(L), is_causal=True,
           src_key_padding_mask=causal_kpm)
mask(case, "src_mask", fkw["mask"])
mask(case, "src_key_padding_mask", fkw["src_key_padding_mask"])
finish(case, m, {"src": x}, m(x, **fkw))

# TransformerDecoderLayer(d_model 4, nhead 2, dim_feedforward 6) on tgt [T=3, N, 4] and memory
# [S=4, N, 4], eval; TransformerDecoder of 2 pre-norm gelu layers and a final LayerNorm.
memory_mask = torch.tensor([[False, True, False, False], [False, False, True, False],
                            [True, False, False, True]])
dec_cases = [
    ("dec_post_relu", dict(), 2, dict(tgt_mask=bool_mask2[:, :3], memory_mask=float_mask3[0],
                                      tgt_key_padding_mask=bool_kpm[:, :3],
                                      memory_key_padding_mask=bool_kpm)),
    ("dec_pre_gelu_bf_causal", dict(norm_first=True, activation="gelu", batch_first=True), 0,
     dict(tgt_mask=nn.Transformer.generate_square_subsequent_mask(L), tgt_is_causal=True,
          memory_mask=memory_mask)),
    ("decoder2", dict(norm_first=True, activation="gelu"), 2,
     dict(tgt_mask=nn.Transformer.generate_square_subsequent_mask(L), tgt_is_causal=True,
          memory_key_padding_mask=bool_kpm)),
]
for case, kw, layers, fkw in dec_cases:
    layer = nn.TransformerDecoderLayer(E, H, 6, **kw)
    m = (nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(E)) if case == "decoder2"
         else layer).eval()
    load_params(case, m)
    bf = kw.get("batch_first")
    tgt = leaf(case, "tgt", [N, L, E] if bf else [L, N, E], 1)
    memory = leaf(case, "memory", [N, S, E] if bf else [S, N, E], 2)
    for name in ("tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask"):
        if name in fkw:
            mask(case, name, fkw[name])
    finish(case, m, {"tgt": tgt, "memory": memory}, m(tgt, memory, **fkw))

with open("tests/data/nn/transformer_reference.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
print("torch", torch.__version__, "wrote", len(lines), "tensors")
