"""Prints where PyTorch (torch_w<N>_r*.json from probe.py under torchrun) and dtensor
(dt_w<N>_r*.json from probe.cc under mpirun) differ: an error on one side only, placements,
local shapes or global shapes, values beyond the tolerance (relative 1e-9 in float64; the
mixed-precision case 'mp' is compared at bf16's 2^-8 relative to the largest value of the
entry), None gradients on one side. Usage: python3 compare.py N (in the directory of the files), or compare.py nn for
nn_probe.py / nn_probe.cc (torch_nn.json, dt_nn.json). Exits 1 when anything differs (a case
present on one side only included), 0 when nothing does.
"""
import json, sys

differences = 0


def differ(*args):  # prints one difference and counts it
    global differences
    differences += 1
    print(*args)


arg = sys.argv[1] if len(sys.argv) > 1 else '4'
files = ([('torch_nn.json', 'dt_nn.json')] if arg == 'nn' else
         [('torch_w%s_r%d.json' % (arg, r), 'dt_w%s_r%d.json' % (arg, r)) for r in range(int(arg))])
for r, (tf, df) in enumerate(files):
    T = {e['case']: e for e in json.load(open(tf))}
    D = {e['case']: e for e in json.load(open(df))}
    for k, t in T.items():
        d = D.get(k)
        if d is None:
            differ(r, k, 'MISSING in dt'); continue
        if 'error' in t or 'error' in d:
            if t.get('error') != d.get('error'):
                differ(r, k, 'ERROR torch:', t.get('error'), '| dt:', d.get('error'))
            continue
        if 'local' in t and t['lshape'] == [] and 'value' in d:  # a 0-d tensor against a double
            t = dict(case=k, value=t['local'][0])
        if t.get('placements') == ['local'] and d.get('placements') != ['local']:  # replicate's plain tensors: dtensor's Replicate DTensors
            t = dict(t, placements=['R'])
        if 'value' in t or 'value' in d:
            tv, dv = t.get('value'), d.get('value')
            if isinstance(tv, float) and isinstance(dv, float):
                tol = 4e-3 if '_mp_' in k else 1e-9
                if abs(tv - dv) > tol * max(1, abs(tv)): differ(r, k, 'torch', tv, 'dt', dv)
            elif tv != dv:
                differ(r, k, 'torch', tv, '| dt', dv if dv is not None else d.get('placements'))
            continue
        diffs = []
        for f in ('placements', 'lshape', 'gshape'):
            if t[f] != d[f]: diffs.append('%s torch=%s dt=%s' % (f, t[f], d[f]))
        scale = max([1e-12] + [abs(a) for a in t['local']])
        tol = 2 ** -8 * scale if '_mp_' in k else 1e-9 * max(1, scale)
        if len(t['local']) != len(d['local']) or any(abs(a - b) > tol for a, b in zip(t['local'], d['local'])):
            diffs.append('local torch=%s dt=%s' % ([round(v, 7) for v in t['local'][:6]],
                                                   [round(v, 7) for v in d['local'][:6]]))
        if diffs: differ(r, k, '; '.join(diffs))
    for k in D:
        if k not in T: differ(r, k, 'MISSING in torch')
print('%d difference(s)' % differences)
sys.exit(1 if differences else 0)
