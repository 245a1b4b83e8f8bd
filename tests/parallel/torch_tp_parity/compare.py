"""Prints where PyTorch (torch_w<N>_r*.json from probe.py under torchrun) and dtensor
(dt_w<N>_r*.json from probe.cc under mpirun) differ, rank by rank: an error on one side only
(messages differ by design, so two errors are equal; -v prints both), placements, local shapes,
global shapes, values beyond relative 1e-9 (float64), None on one side, a case present on one
side only; the deliberate ones (KEPT below) are counted apart. A PyTorch P(sum) record against a dtensor R one is counted apart (not a difference)
when PyTorch's pieces sum to dtensor's value, and so is a PyTorch R record against a dtensor S(d)
one when the torch.chunk piece of PyTorch's equals dtensor's shard. Usage: python3 compare.py N [-v] in the directory of the files. Exits 1 when anything
differs, 0 when nothing does.
"""
import json, sys

differences = 0
# Deliberate differences (docs/SEMANTICS.md, round 7a): printed as 'kept:', not counted.
KEPT = {
    'emb_row ': "PyTorch's RowwiseParallel takes an Embedding's input as Shard(-1) by default",
    'prep_out_same_layout ': 'PyTorch skips the redistribute when output_layouts == desired',
    'fsdp_tp_': "FSDP2 + TP layouts (PyTorch _StridedShard); the 'full' records compare values",
    'prep_in_none ': 'no None input layouts in dtensor',
    'loss_smooth loss_parallel ': "PyTorch's loss_parallel refuses label_smoothing",
    'loss_weight_ignore_sum loss_parallel ': "PyTorch's loss_parallel refuses weights with ignored targets",
    'row_uneven_in5_S ': "PyTorch's from_local takes uneven local inputs as even shards",
    'mlp5_local ': "PyTorch's from_local takes uneven local inputs as even shards",
    'loss_replicated_logits ': "PyTorch's loss_parallel requires the class dim sharded",
    'err_nomatch': 'an unmatched plan entry: a warning in PyTorch, an error in dtensor',
}
kept = 0


def differ(r, k, *args):  # prints one difference and counts it (or prints it as kept)
    global differences, kept
    why = next((w for p, w in KEPT.items() if (k + ' ').startswith(p)), None)
    if why is not None:
        kept += 1
        if verbose: print('kept:', r, k, *args, '(%s)' % why)
        return
    differences += 1
    print(r, k, *args)


W = int(sys.argv[1]) if len(sys.argv) > 1 else 2
verbose = '-v' in sys.argv
TT = [{e['case']: e for e in json.load(open('torch_w%d_r%d.json' % (W, r)))} for r in range(W)]
DD = [{e['case']: e for e in json.load(open('dt_w%d_r%d.json' % (W, r)))} for r in range(W)]
def close(a, b):  # NaN equals only NaN
    if a != a or b != b: return a != a and b != b
    return abs(a - b) <= 1e-9 * max(1, abs(a))


reduced = 0  # PyTorch's P(sum) gradients that equal dtensor's R ones once summed over the ranks


def partial_sum_equal(k, d):
    # A 1-d mesh's P(sum) on PyTorch's side against R on dtensor's: the sum of PyTorch's pieces.
    if d['placements'] != ['R'] or TT[0][k]['placements'] != ['P(sum)']:
        return False
    total = [sum(TT[q][k]['local'][i] for q in range(W)) for i in range(len(d['local']))]
    return all(close(a, b) for a, b in zip(total, d['local']))


def shard_of_replicate_equal(k, t, d, r):
    # PyTorch's R (whole) record against dtensor's S(dim) shard of it (torch.chunk's rows).
    if t['placements'] != ['R'] or len(d['placements']) != 1 or not d['placements'][0].startswith('S('):
        return False
    shape, dim = t['gshape'], int(d['placements'][0][2:-1])
    if shape != d['gshape']: return False
    n, inner = shape[dim], 1
    for v in shape[dim + 1:]: inner *= v
    outer = len(t['local']) // max(1, n * inner)
    size = -(-n // W)
    lo, hi = min(n, r * size), min(n, (r + 1) * size)
    piece = [t['local'][(o * n + i) * inner + j] for o in range(outer) for i in range(lo, hi) for j in range(inner)]
    return len(piece) == len(d['local']) and all(close(a, b) for a, b in zip(piece, d['local']))


sharded = 0  # PyTorch's whole R gradients whose torch.chunk equals dtensor's S(d) shard
for r in range(W):
    T, D = TT[r], DD[r]
    # A run that raised on one side has no step records there: only its error is reported.
    raised = [k + ' ' for k, e in list(T.items()) + list(D.items()) if 'error' in e]
    for k, t in T.items():
        d = D.get(k)
        if d is None and any(k.startswith(p) for p in raised): continue
        if d is None and 'error' in t:
            differ(r, k, 'ERROR torch only:', t['error']); continue
        if d is None:
            differ(r, k, 'MISSING in dt'); continue
        if 'error' in t or 'error' in d:
            if ('error' in t) != ('error' in d):
                differ(r, k, 'ERROR torch:', t.get('error', t.get('value')), '| dt:', d.get('error', d.get('value')))
            elif verbose and r == 0:
                print(r, k, 'both raise | torch:', t['error'], '| dt:', d['error'])
            continue
        if 'value' in t or 'value' in d:  # 'None', 'ok', or a tensor on one side only
            tv, dv = t.get('value', t.get('placements')), d.get('value', d.get('placements'))
            if str(tv).split(' (warning')[0] != str(dv):
                differ(r, k, 'torch', tv, '| dt', dv)
            continue
        if t['placements'] != d['placements'] and partial_sum_equal(k, d):
            reduced += 1
            continue
        if t['placements'] != d['placements'] and shard_of_replicate_equal(k, t, d, r):
            sharded += 1
            continue
        diffs = []
        for f in ('placements', 'lshape', 'gshape'):
            if t[f] != d[f]: diffs.append('%s torch=%s dt=%s' % (f, t[f], d[f]))
        if len(t['local']) != len(d['local']) or not all(close(a, b) for a, b in zip(t['local'], d['local'])):
            diffs.append('local torch=%s dt=%s' % ([round(v, 7) for v in t['local'][:6]],
                                                   [round(v, 7) for v in d['local'][:6]]))
        if diffs: differ(r, k, '; '.join(diffs))
    for k in D:
        if k not in T and 'error' in D[k]:
            differ(r, k, 'ERROR dt only:', D[k]['error'])
        elif k not in T and not any(k.startswith(p) for p in raised):
            differ(r, k, 'MISSING in torch')
print('%d record(s) where PyTorch keeps P(sum) and dtensor R, equal once summed' % reduced)
print('%d record(s) where PyTorch keeps R and dtensor S(d), the shard equal' % sharded)
print('%d kept difference(s) (-v prints them)' % kept)
print('%d difference(s)' % differences)
sys.exit(1 if differences else 0)
