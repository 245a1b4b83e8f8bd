"""Prints where PyTorch (torch_w<N>_r*.json from probe.py under torchrun) and dtensor
(dt_w<N>_r*.json from probe.cc under mpirun) differ, rank by rank: an error on one side only,
shapes, values beyond 1e-9 relative (float64), a case present on one side only. The deliberate
differences (may_raise, decided from the case's name: docs/SEMANTICS.md round 8d) are printed
with -v and counted apart; an error on both sides (messages differ by design) is counted, and is
a difference unless both sides may raise on that case.
Usage: python3 compare.py N [-v] in the directory of the files. Exits 1 when anything differs
or a rank compared nothing.
"""
import json, re, sys

W = int(sys.argv[1]) if len(sys.argv) > 1 else 2


def may_raise(side, k):
    """The deliberate differences (docs/SEMANTICS.md round 8d), decided from the case's name:
    why side ('torch' or 'dt') may raise on case k, or None where it must run."""
    m = re.fullmatch(r'(shard|unshard) (\w+) S(\d+) lb([01])', k)
    if m:
        kind, buf, S, lb = m.group(1), m.group(2), int(m.group(3)), m.group(4) == '1'
        # PyTorch's context_parallel falls back to the natural order when S % (2 N) != 0;
        # dtensor's load_balance = true refuses such a length (pass load_balance = false).
        if side == 'dt' and lb and S % (2 * W):
            return 'load balance with S not a multiple of 2 N: PyTorch falls back, dtensor refuses'
        if side == 'torch' and kind == 'unshard' and S % W:
            return 'uneven shards: gloo aborts, probe.py does not run it'
        if side == 'torch' and kind == 'unshard' and buf == 'pos' and lb:
            return "a 1-d buffer load-balanced: PyTorch's unshard assumes dim 0 is the batch"
        return None
    m = re.fullmatch(r'lb_(index|restore) S(\d+)', k)
    if m and int(m.group(2)) % (2 * W):
        return "S not a multiple of 2 N: PyTorch's _HeadTailLoadBalancer asserts, dtensor refuses"
    if side == 'torch' and k == 'torch_cp_sdpa':
        return "PyTorch's context_parallel has no CPU attention"
    if side == 'torch' and re.match(r'ring S\d+ c0 lb1 ', k):
        return "PyTorch's ring refuses load balancing without causality; dtensor's ignores it"
    return None


verbose = '-v' in sys.argv
differences = kept = both_raise = 0


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1, abs(a))


def differ(r, k, what, raised=None):
    """raised: the side that raised alone, kept when may_raise allows it."""
    global differences, kept
    why = may_raise(raised, k) if raised else None
    if why is not None:
        kept += 1
        if verbose: print('kept:', r, k, what, '(%s)' % why)
        return
    differences += 1
    print(r, k, what)


for r in range(W):
    T = {e['case']: e for e in json.load(open('torch_w%d_r%d.json' % (W, r)))}
    D = {e['case']: e for e in json.load(open('dt_w%d_r%d.json' % (W, r)))}
    compared = 0
    # Cases with an error on one side and per-tensor records ('<case> out', ...) on the other.
    raised_only = {}
    for A, B, side in ((T, D, 'torch'), (D, T, 'dt')):
        for k, e in A.items():
            if 'error' in e and k not in B and any(j.startswith(k + ' ') for j in B):
                raised_only[k] = (side, e['error'])
    raised = set(raised_only)
    for k in sorted(set(T) | set(D)):
        t, d = T.get(k), D.get(k)
        # A case that raised on one side has no per-tensor records there: its error is reported.
        if any(k.startswith(e + ' ') for e in raised): continue
        if t is None or d is None:
            if k in raised_only:
                differ(r, k, 'ERROR %s only: %s' % raised_only[k], raised_only[k][0]); continue
            differ(r, k, 'MISSING in ' + ('torch' if t is None else 'dt')); continue
        compared += 1
        if 'error' in t or 'error' in d:
            if ('error' in t) != ('error' in d):
                differ(r, k, 'ERROR torch: %s | dt: %s' % (t.get('error', '-'), d.get('error', '-')),
                       'torch' if 'error' in t else 'dt')
                continue
            both_raise += 1
            if may_raise('torch', k) is None or may_raise('dt', k) is None:
                differ(r, k, 'ERROR on both sides of a case expected to run | torch: %s | dt: %s' % (
                    t['error'], d['error']))
            elif verbose and r == 0:
                print('both raise:', k, '| torch:', t['error'], '| dt:', d['error'])
            continue
        if 'value' in t or 'value' in d:
            if t.get('value') != d.get('value'):
                differ(r, k, 'torch %s | dt %s' % (t.get('value'), d.get('value')))
            continue
        if t['shape'] != d['shape']:
            differ(r, k, 'shape torch=%s dt=%s' % (t['shape'], d['shape']))
        elif not all(close(a, b) for a, b in zip(t['values'], d['values'])):
            worst = max(abs(a - b) for a, b in zip(t['values'], d['values']))
            differ(r, k, 'values differ by up to %.3g: torch=%s dt=%s' % (
                worst, [round(v, 7) for v in t['values'][:6]], [round(v, 7) for v in d['values'][:6]]))
    print('rank %d: %d case(s) compared' % (r, compared))
    if compared == 0:
        differences += 1
        print('rank %d: nothing compared' % r)
print('%d kept difference(s) (-v prints them)' % kept)
print('%d case(s) raised on both sides (-v prints the deliberate ones)' % both_raise)
print('%d difference(s)' % differences)
sys.exit(1 if differences else 0)
