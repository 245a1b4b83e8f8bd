#!/usr/bin/env python3
"""The PyTorch parity sweep: compares what dtensor computes for every registered op's sample
calls (forward values, output dtype and shape, first-order gradients) with PyTorch.

    build/tests/ops/parity/parity_dump > /tmp/dump.jsonl
    /root/venv/bin/python tests/ops/parity/torch_parity.py /tmp/dump.jsonl \
        [--op NAME]... [--write-references tests/ops/parity/parity_references.json]

The dump (tests/ops/parity/parity_dump.cc) holds one JSON object per case: op, sample, variant
(random / edge / float32), args, inputs, requires_grad, and dtensor's outputs, cotangents and
grads (or "error" / "backward_error"). Each op maps to PyTorch through MAP[op](inputs, args) of
the torch_map_*.py modules of this folder (merged): inputs are torch leaf tensors (those of
requires_grad require grad; an in-place op must work on a clone, as dtensor's run does), args are
Python values (None, int, float, bool, list for a shape, torch.dtype, "sum"/"avg"/... for a reduce
op, str); it returns a tensor or a tuple / list of tensors in dtensor's output order. SKIP
{op: reason} lists the ops with no PyTorch analogue; DELIBERATE {(op, variant): reason} or
{(op, variant, sample): reason} the documented differences (docs/SEMANTICS.md), kept in the
references with the places that differ ("differs") and checked to still differ there exactly.

Rules: shape and dtype exactly; NaN where PyTorch has NaN, the same infinities, float64 within
1e-12 relative or 1e-14 of the tensor's largest magnitude up to 1e200 (an element that cancels; at
least 1e-300), float32 within 1e-6 relative or 2 ulps or 1e-6 of the tensor's largest magnitude up
to 1e30 (an edge case's 1e300 does not set the floor),
float16 / bfloat16 within 2 ulps; integers and bools exactly. A zero of the other sign is reported
apart ("sign of zero") and does not fail. Gradients: torch.autograd.grad of the outputs with the
dumped cotangents (allow_unused: PyTorch's None equals dtensor's zeros or undefined). Errors:
both raise or neither; the gradient at a NaN input element is not compared (unspecified:
PyTorch's is NaN, 0 or a branch's by op). Prints one line per mismatch and a summary; exits 1 on a mismatch not
listed in DELIBERATE.
"""
import argparse
import glob
import importlib
import json
import math
import os
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
          "bool": torch.bool}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
# Relative tolerance and ulps per floating dtype.
TOLERANCE = {"float64": (1e-12, 0), "float32": (1e-6, 2), "float16": (0.0, 2),
             "bfloat16": (0.0, 2)}
# The largest magnitude that sets the norm-wise floor: an edge case's 1e300 (float64) is left out,
# an ordinary value (at most ~1e20 in the samples) stays in; float32: 1e30, below its 3.4e38
# range, above any ordinary sample value.
HUGE = {"float64": 1e200, "float32": 1e30}
# A float32 case's reference tolerance from PyTorch's own float32 error is refused above this
# (an element where PyTorch is far off would otherwise loosen every element of the case).
MAX_FLOAT64_REFERENCE_RTOL = 1e-3


def load_maps():
    maps, skip, deliberate = {}, {}, {}
    sys.path.insert(0, HERE)
    for path in sorted(glob.glob(os.path.join(HERE, "torch_map_*.py"))):
        mod = importlib.import_module(os.path.basename(path)[:-3])
        for name, table in (("MAP", maps), ("SKIP", skip), ("DELIBERATE", deliberate)):
            for k, v in getattr(mod, name, {}).items():
                if k in table:
                    raise SystemExit(f"torch_parity: {k} in two modules' {name}")
                table[k] = v
    both = set(maps) & set(skip)
    if both:
        raise SystemExit(f"torch_parity: in MAP and SKIP: {sorted(both)}")
    return maps, skip, deliberate


def number(x):
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0": -0.0}[x]
    return x


def encode_number(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0 and math.copysign(1.0, x) < 0:
        return "-0"
    return x


def decode_tensor(j):
    if j is None:
        return None
    dtype = DTYPES[j["dtype"]]
    if dtype.is_floating_point:
        t = torch.tensor([number(v) for v in j["values"]], dtype=torch.float64).to(dtype)
    else:
        t = torch.tensor(j["values"], dtype=dtype)
    return t.reshape(j["shape"])


def encode_tensor(t):
    if t is None:
        return None
    t = t.detach().cpu()
    if t.dtype.is_floating_point:
        values = [encode_number(v) for v in t.double().reshape(-1).tolist()]
    else:
        values = t.reshape(-1).tolist()
    return {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "values": values}


def decode_arg(a):
    (kind, v), = a.items()
    if kind == "double":
        return float(number(v))
    if kind == "dtype":
        return DTYPES[v]
    return v  # none -> None, int, bool, shape -> list, reduce / str -> str


def ulps(a, b, dtype):
    """How many representable values of `dtype` lie between a and b (both finite)."""
    t = torch.tensor([a, b], dtype=torch.float64).to(dtype)
    if dtype == torch.float32:
        i = t.view(torch.int32).long()
    elif dtype == torch.float64:
        i = t.view(torch.int64)
    else:
        i = t.view(torch.int16).long()
    i = torch.where(i < 0, -(i & ((1 << (8 * t.element_size() - 1)) - 1)), i)
    return abs(int(i[0]) - int(i[1]))


def first_difference(ours, theirs, what, unspecified=(), positions=None):
    """None when `ours` (dump JSON) matches torch tensor `theirs`, else a description; the
    elements at the indices `unspecified` are not compared. The second value lists a sign-of-zero
    difference (reported apart). `positions` (a list): every differing element's index is
    appended (a difference of the whole tensor appends nothing)."""
    if ours is None or theirs is None:
        # PyTorch's None gradient (unused input) equals dtensor's zeros or undefined.
        other = theirs if ours is None else decode_tensor(ours)
        if other is None or not other.dtype.is_floating_point or all(
                v == 0 for i, v in enumerate(other.reshape(-1).tolist()) if i not in unspecified):
            return None, None
        return f"{what}: {'ours' if ours is None else 'torch'} is None, the other nonzero", None
    theirs = theirs.detach().cpu()
    tname = DTYPE_NAMES.get(theirs.dtype, str(theirs.dtype))
    if ours["dtype"] != tname:
        return f"{what}: dtype {ours['dtype']} vs torch {tname}", None
    if ours["shape"] != list(theirs.shape):
        return f"{what}: shape {ours['shape']} vs torch {list(theirs.shape)}", None
    flat = theirs.reshape(-1)
    values = flat.double().tolist() if theirs.dtype.is_floating_point else flat.tolist()
    rel, max_ulps = TOLERANCE.get(tname, (None, None))
    # Also 1e-6 (float32) / 1e-14 (float64) of the tensor's largest finite magnitude: an element
    # that cancels (a gradient g - sum(g y), an interpolation of values of both signs) keeps the
    # absolute rounding of the terms it came from, whatever their order.
    # Magnitudes above HUGE (an edge input's 1e300 and what it scales) stay out of that max, or
    # the floor (1e286) would let every ordinary element of the tensor pass.
    floor = 0.0
    if tname in ("float32", "float64"):
        finite = [abs(v) for v in values if math.isfinite(v) and abs(v) <= HUGE[tname]]
        floor = (1e-6 if tname == "float32" else 1e-14) * max(finite, default=0.0)
    zero_sign, first = None, None
    for i, (a, b) in enumerate(zip(ours["values"], values)):
        a = number(a)
        if i in unspecified:
            continue
        if element_matches(a, b, rel, max_ulps, floor, theirs.dtype):
            if a == b == 0 and math.copysign(1, a) != math.copysign(1, b) and zero_sign is None:
                zero_sign = f"{what}: [{i}] {a!r} vs torch {b!r}"
            continue
        first = first or f"{what}: [{i}] {a!r} vs torch {b!r}"
        if positions is None:
            return first, None
        positions.append(i)
    return first, None if first else zero_sign


def element_matches(a, b, rel, max_ulps, floor, dtype):
    """Whether dtensor's element a matches PyTorch's b by the rules (rel None: exactly)."""
    if rel is None or a == b:
        return a == b
    if math.isnan(b) or math.isnan(a):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return False
    if abs(a - b) <= rel * max(abs(a), abs(b)) + max(floor, 1e-300):
        return True
    return bool(max_ulps) and ulps(a, b, dtype) <= max_ulps


def as_list(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return list(out)


def torch_case(fn, case):
    """PyTorch's side of a case: (error, outputs, backward_error, grads) for the dumped inputs,
    args and cotangents."""
    leaves = []
    for j, rg in zip(case["inputs"], case["requires_grad"]):
        t = decode_tensor(j)
        leaves.append(t.requires_grad_() if rg and t.dtype.is_floating_point else t)
    args = [decode_arg(a) for a in case["args"]]
    try:
        outs = as_list(fn(leaves, args))
    except Exception as e:  # noqa: BLE001 (any error PyTorch raises counts as raising)
        return f"{type(e).__name__}: {e}".splitlines()[0], None, None, None
    cots = case.get("cotangents") or [None] * len(outs)
    roots, grads_out = [], []
    for o, c in zip(outs, cots):
        if c is not None and o.requires_grad:
            roots.append(o)
            grads_out.append(decode_tensor(c).to(o.dtype))
    wrt = [t for t in leaves if t.requires_grad]
    grads = [None] * len(leaves)
    if roots and wrt:
        try:
            g = torch.autograd.grad(roots, wrt, grads_out, allow_unused=True)
        except Exception as e:  # noqa: BLE001
            return None, outs, f"{type(e).__name__}: {e}".splitlines()[0], None
        k = 0
        for i, t in enumerate(leaves):
            if t.requires_grad:
                grads[i] = g[k]
                k += 1
    return None, outs, None, grads


def raise_difference(ours, theirs, stage):
    """Both raise or neither: None, else what differs (ours / theirs: the message or None)."""
    if ours is not None and theirs is None:
        return f"dtensor {stage}raises ({ours[:160]}), torch's does not"
    if ours is None and theirs is not None:
        return f"torch {stage}raises ({theirs}), dtensor's does not"
    return None


def compare(case, terr, touts, tberr, tgrads, where=None):
    """The differences between dtensor's case and PyTorch's side: (list of strings, sign-of-zero
    notes). `where` (a dict): each difference's place, "output 0" / "grad of input 1" -> the
    differing elements' indices (empty: the whole tensor), or "raises" / "outputs" /
    "backward raises" -> [] (test_torch_parity.cc's differences() names them the same)."""
    diffs, zeros = [], []
    where = {} if where is None else where

    def tensors(ours, theirs, what, unspecified=None):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            positions = []
            d, z = first_difference(a, b, f"{what} {i}", unspecified[i] if unspecified else (),
                                    positions)
            if d:
                diffs.append(d)
                where[f"{what} {i}"] = positions
            zeros.extend([z] if z else [])

    if "error" in case or terr is not None:
        d = raise_difference(case.get("error"), terr, "")
        where.update({"raises": []} if d else {})
        return [d] if d else [], zeros
    if len(case["outputs"]) != len(touts):
        where["outputs"] = []
        return [f"{len(case['outputs'])} outputs vs torch {len(touts)}"], zeros
    tensors(case["outputs"], touts, "output")
    if "backward_error" in case or tberr is not None:
        d = raise_difference(case.get("backward_error"), tberr, "backward ")
        where.update({"backward raises": []} if d else {})
        return diffs + ([d] if d else []), zeros
    tensors(case["grads"], tgrads, "grad of input", [nan_positions(j) for j in case["inputs"]])
    return diffs, zeros


def nan_positions(j):
    """The indices of an input's NaN elements: the gradient there is unspecified (PyTorch's is
    NaN, 0 or the gradient of a branch, by op; docs/SEMANTICS.md, "Gradients")."""
    return {i for i, v in enumerate(j["values"]) if v == "nan"}


def upcast(case):
    """The case with its float32 inputs, cotangents and dtype args in float64."""
    def up(j):
        return j if j is None or j["dtype"] != "float32" else dict(j, dtype="float64")
    c = dict(case)
    c["inputs"] = [up(j) for j in case["inputs"]]
    if case.get("cotangents"):
        c["cotangents"] = [up(j) for j in case["cotangents"]]
    c["args"] = [{"dtype": "float64"} if a == {"dtype": "float32"} else a for a in case["args"]]
    return c


def rounded(ts):
    """float64 tensors of `ts` rounded to float32."""
    if ts is None:
        return None
    return [t if t is None or t.dtype != torch.float64 else t.detach().float() for t in ts]


def float64_side(fn, case):
    """PyTorch's side of a float32 case computed in float64 and rounded to float32 (the correctly
    rounded values), or None when PyTorch raises there."""
    terr, touts, tberr, tgrads = torch_case(fn, upcast(case))
    if terr is not None:
        return None
    return terr, rounded(touts), tberr, rounded(tgrads)


def no_worse(case, touts, tgrads, routs, rgrads):
    """For a float32 case: None unless each dtensor value is at least as close to r, the value
    PyTorch computes in float64 on the same inputs (rounded to float32), as PyTorch's float32
    value is (up to the float32 tolerance); then the relative tolerance around r that covers
    both (at least 1e-6), which the references keep."""
    rtol = 1e-6
    pairs = list(zip(case["outputs"], touts, routs)) + list(zip(case["grads"], tgrads, rgrads))
    for ours, theirs, r in pairs:
        if first_difference(ours, theirs, "")[0] is None and (ours is None or r is None):
            continue
        if ours is None or theirs is None or r is None or ours["dtype"] != "float32":
            return None
        if ours["shape"] != list(r.shape):
            return None
        for a, b, c in zip(ours["values"], theirs.detach().reshape(-1).double().tolist(),
                           r.reshape(-1).double().tolist()):
            a = number(a)
            if not all(map(math.isfinite, (a, b, c))):
                if not (a == c or (math.isnan(a) and math.isnan(c))):
                    return None
                continue
            if abs(a - c) > abs(b - c) + 2.4e-7 * abs(c):
                return None
            if c != 0:
                rtol = max(rtol, abs(b - c) / abs(c), abs(a - c) / abs(c))
            elif a != 0:
                return None
    return rtol if rtol <= MAX_FLOAT64_REFERENCE_RTOL else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dump")
    p.add_argument("--op", action="append", default=[])
    p.add_argument("--write-references")
    p.add_argument("--max-cases-per-variant", type=int, default=1,
                   help="references: at most this many cases per op and variant (and as many "
                        "deliberate differences)")
    p.add_argument("--max-numel", type=int, default=100,
                   help="references: beyond the first case of an (op, variant), skip cases "
                        "with more elements (inputs, outputs, gradients)")
    p.add_argument("--quiet-zero", action="store_true", help="do not list sign-of-zero notes")
    opts = p.parse_args()
    torch.set_default_dtype(torch.float64)
    maps, skip, deliberate = load_maps()
    compared_ops, unmapped, skipped = set(), set(), set()
    cases = mismatches = deliberate_seen = 0
    zero_notes, accurate = [], []
    references, per_op, smallest = [], {}, {}
    with open(opts.dump) as f:
        dump = [json.loads(line) for line in f if line.strip()]
    for case in dump:
        op = case["op"]
        if opts.op and op not in opts.op:
            continue
        if op in skip:
            skipped.add(op)
            continue
        if op not in maps:
            unmapped.add(op)
            continue
        compared_ops.add(op)
        cases += 1
        terr, touts, tberr, tgrads = torch_case(maps[op], case)
        places = {}
        diffs, zeros = compare(case, terr, touts, tberr, tgrads, places)
        where = f"{op} sample {case['sample']} {case['variant']}"
        # A float32 case where each dtensor value is no farther from PyTorch's float64 value (on
        # the same inputs) than PyTorch's float32 value is (PyTorch loses digits to cancellation
        # or a float constant): not a mismatch; the reference holds the rounded float64 values.
        reference = None
        if diffs and terr is None and tberr is None and any(
                j["dtype"] == "float32" for j in case["inputs"]):
            side = float64_side(maps[op], case)
            rtol = side and no_worse(case, touts, tgrads, side[1], side[3])
            if rtol is not None:
                accurate.append(f"{where}: {'; '.join(diffs)}")
                terr, touts, tberr, tgrads = side
                diffs, zeros, reference = [], [], {"rtol": rtol}
        zero_notes += [f"{where}: {z}" for z in zeros]
        reason = deliberate.get((op, case["variant"], case["sample"]),
                                deliberate.get((op, case["variant"])))
        if diffs:
            if reason:
                deliberate_seen += 1
                print(f"deliberate  {where}: {'; '.join(diffs)}  [{reason}]")
            else:
                mismatches += 1
                print(f"MISMATCH    {where}: {'; '.join(diffs)}")
        if opts.write_references and (not diffs or reason):
            numel = sum(len(j["values"]) for part in ("inputs", "outputs", "grads")
                        for j in case.get(part) or [] if j is not None)
            key = (op, case["variant"], bool(diffs))
            # Each (op, variant) keeps a case whatever its size: the first one, replaced by a
            # smaller one while it is above --max-numel (a deliberate difference: while it is not
            # the smallest, it must be seen); further cases only up to --max-numel. An op whose
            # cases are all above --max-numel (sdpa, 2d / 3d pools and upsamples: 10-40 kB each)
            # keeps its edge case only (the variants share the shapes), so that the file stays
            # under 2 MB.
            kept = smallest.get(key)
            smaller = kept is not None and numel < kept[0] and (diffs or kept[0] > opts.max_numel)
            big = numel > opts.max_numel and (kept is not None or (
                not diffs and case["variant"] != "edge"))
            if not smaller and (big or per_op.get(key, 0) >= opts.max_cases_per_variant):
                continue
            per_op[key] = per_op.get(key, 0) + (0 if smaller else 1)
            ref = {k: case[k] for k in ("op", "sample", "variant", "args", "inputs",
                                        "requires_grad")}
            if terr is not None:
                ref["error"] = True
            else:
                ref["cotangents"] = case.get("cotangents")
                ref["outputs"] = [encode_tensor(t) for t in touts]
                if tberr is not None:
                    ref["backward_error"] = True
                else:
                    ref["grads"] = [encode_tensor(g) for g in tgrads]
            if diffs:
                ref["deliberate"] = reason
                ref["differs"] = places
            if reference:
                ref["float64_reference"] = reference
            if smaller:
                references[smallest[key][1]] = ref
                smallest[key] = (numel, smallest[key][1])
            else:
                if key not in smallest:
                    smallest[key] = (numel, len(references))
                references.append(ref)
    if not opts.quiet_zero:
        for z in zero_notes:
            print(f"sign of zero {z}")
    for a in accurate:
        print(f"float32, dtensor no farther from the float64 value than PyTorch {a}")
    print(f"compared {len(compared_ops)} ops / {cases} cases: {mismatches} mismatching, "
          f"{deliberate_seen} deliberate differences, {len(accurate)} float32 cases where dtensor "
          f"is no farther from the float64 value than PyTorch, "
          f"{len(zero_notes)} sign-of-zero notes; "
          f"skipped {len(skipped)} ops: "
          + "; ".join(f"{op} ({skip[op]})" for op in sorted(skipped)))
    if unmapped:
        print(f"not mapped yet ({len(unmapped)}): {', '.join(sorted(unmapped))}")
    if opts.write_references:
        with open(opts.write_references, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in references)
                    + "\n]\n")
        print(f"wrote {len(references)} cases of {len({k[0] for k in per_op})} ops to "
              f"{opts.write_references}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
