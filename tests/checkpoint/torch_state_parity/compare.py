"""Prints where PyTorch (torch_state.json from probe.py) and dtensor (dt_state.json from
probe.cc) differ: values beyond a relative 1e-9 (float64 on both sides), an error on one side
only, a case present on one side only; and, on each side, a resumed run ('resumed', and
dtensor's in-memory 'resumed_mem') that is not bit for bit the uninterrupted one ('whole').
Errors on both sides count as agreeing (the messages differ), and so do loads that succeed on
both sides. The key-name cases (keys/...) and the cases in BY_DESIGN differ by design
(docs/SEMANTICS.md, round 7c): they are printed, not counted.
Usage: python3 compare.py (in the directory of the two files); python3 compare.py reshard
compares dt_state_reshard.json (probe.cc "save DIR" at 2 ranks, then "load DIR" at 4: a resume
onto another world size and layout) with PyTorch's uninterrupted values. Exits 1 when anything counted
differs, 0 otherwise.
"""
import json, sys

differences = 0


def differ(*args):  # prints one difference and counts it
    global differences
    differences += 1
    print(*args)


def close(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if len(a) != len(b):
        return False
    if a and isinstance(a[0], str):
        return a == b
    scale = max([1e-300] + [abs(x) for x in a + b])
    return all(abs(x - y) <= 1e-9 * scale for x, y in zip(a, b))


# dtensor has no non-strict load and ignores extra entries; it checks an optimizer state's
# shapes and names when it is loaded (PyTorch loads them unchecked).
BY_DESIGN = {'errors/model/missing/nonstrict', 'errors/model/extra/strict',
             'errors/optim/misshaped/load', 'errors/optim/other_optimizer/load'}
reshard = len(sys.argv) > 1 and sys.argv[1] == 'reshard'
T = {e['case']: e for e in json.load(open('torch_state.json'))}
D = {e['case']: e for e in json.load(open('dt_state_reshard.json' if reshard else 'dt_state.json'))}
if reshard:  # only the resumed cases probe.cc's "load" mode recorded, against PyTorch's
    T = {k: t for k, t in T.items() if k in D}
    print('%d resharded cases compared' % len(T))
for k, t in T.items():
    d = D.get(k)
    if d is None:
        differ(k, 'MISSING in dt')
        continue
    if k.startswith('keys/') or k in BY_DESIGN:
        print('(by design)', k, '\n  torch:', t.get('error', t.get('value')),
              '\n  dt:   ', d.get('error', d.get('value')))
        continue
    if ('error' in t) != ('error' in d):
        differ(k, 'torch:', t.get('error', t.get('value')), '| dt:', d.get('error', d.get('value')))
        continue
    if 'error' in t or k.startswith('errors/'):
        continue
    if not close(t['value'], d['value']):
        differ(k, 'torch:', t['value'], '| dt:', d['value'])
for k in D:
    if k not in T and '/resumed_mem/' not in k:
        differ(k, 'only in dt')
# Each side: resumed == whole, exactly (a resharded run: to 1e-9, as against PyTorch).
for side, S in () if reshard else (('torch', T), ('dt', D)):
    for k, e in S.items():
        for run in ('/resumed/', '/resumed_mem/'):
            if run in k and 'value' in e:
                w = S.get(k.replace(run, '/whole/'))
                if w is None or w.get('value') != e['value']:
                    differ(side, k, 'resumed differs from the uninterrupted run:',
                           e['value'], 'vs', w and w.get('value'))
print('%d differences' % differences)
sys.exit(1 if differences else 0)
