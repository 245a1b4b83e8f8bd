"""Prints where PyTorch (torch_pp_w<N>_r*.json from probe.py under torchrun) and dtensor
(dt_pp_w<N>_r*.json from probe.cc under mpirun) differ: an error on one side only (both sides'
messages are printed: they are never the same text), values beyond relative 1e-9 (float64),
action orders. PyTorch's per-microbatch losses list is compared with dtensor's list when
dtensor wrote one and with its mean loss otherwise. Usage: python3 compare.py N in the directory
of the files. Exits 1 when anything differs (a case present on one side only included).
Differences kept on purpose (docs/SEMANTICS.md, round 7b) are printed as 'kept:' and not counted.
"""
import json, re, sys

W = int(sys.argv[1]) if len(sys.argv) > 1 else 2
differences = 0


def differ(r, k, *args):
    global differences
    reason = kept(k, T.get(k, {}), D.get(k, {}))
    if reason:
        print('kept:', r, k, '-', reason)
        return
    differences += 1
    print(r, k, *args)


def kept(k, t, d):
    """The reason a difference is deliberate or PyTorch's, or None."""
    if k.startswith('1F1B_m') and 'must be greater than or equal to the number of stages' in str(t.get('error')):
        return 'Schedule1F1B refuses fewer microbatches than stages; dtensor runs them (GPipe order)'
    if k.startswith('1F1B') and k.endswith(' order') and isinstance(t.get('value'), str):
        shifted = re.sub(r'F(\d+)', lambda g: 'F%d' % (int(g.group(1)) - 1), t['value'])
        if shifted == d.get('value'):
            return ("PyTorch's Schedule1F1B._get_pipeline_order numbers the last rank's forwards "
                    'from 1 (F1..Fm; its runtime runs F0 first): the table, not the run, is off')
    if k.startswith('split layers stage'):
        return ("a split point naming a ModuleList: PyTorch's pipeline() never calls the list, so its "
                'split hook never fires (one stage); pipeline_split begins the stage at the list')
    return None


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-9 * max(1, abs(x)) for x, y in zip(a, b))


for r in range(W):
    T = {e['case']: e for e in json.load(open('torch_pp_w%d_r%d.json' % (W, r)))}
    D = {e['case']: e for e in json.load(open('dt_pp_w%d_r%d.json' % (W, r)))}
    # dtensor's replicate stages (<case>_ddp) against PyTorch's FSDP2 case: PyTorch's own DDP
    # stage fails (probe.py), and the two data-parallel forms compute the same values.
    for k in list(D):
        head = k.split(' ')[0]
        if head.endswith('_ddp') and k not in T:
            base = T.get(k.replace('_ddp', '', 1))
            if base is not None:
                T[k] = dict(base, case=k)
    errors = {k for k in set(T) | set(D) if 'error' in T.get(k, {}) or 'error' in D.get(k, {})}
    for k in sorted(errors):  # a case that raised on one side: its other records do not count
        t, d = T.get(k, {}), D.get(k, {})
        if ('error' in t) != ('error' in d):
            differ(r, k, 'ERROR torch:', t.get('error', 'ran'), '| dt:', d.get('error', 'ran'))
    failed = {k for k in errors}
    skip = lambda k: k.split(' ')[0] in failed
    for k, t in T.items():
        if skip(k) or k in errors:
            continue
        if k.endswith(' losses') and k not in D:
            mean = D.get(k[:-len('losses')] + 'mean loss')
            if mean is None:
                differ(r, k, 'MISSING in dt')
            elif not close([sum(t['value']) / len(t['value'])], [mean['value']]):
                differ(r, k, 'mean torch', sum(t['value']) / len(t['value']), 'dt', mean['value'])
            continue
        d = D.get(k)
        if d is None:
            differ(r, k, 'MISSING in dt'); continue
        if 'local' in t:
            if 'local' not in d or t['lshape'] != d['lshape'] or not close(t['local'], d['local']):
                differ(r, k, 'torch', t['lshape'], [round(v, 7) for v in t['local'][:6]], '| dt',
                       d.get('lshape'), [round(v, 7) for v in d.get('local', [])[:6]])
        elif isinstance(t['value'], float) and isinstance(d['value'], float):
            if not close([t['value']], [d['value']]):
                differ(r, k, 'torch', t['value'], '| dt', d['value'])
        elif isinstance(t['value'], list) and all(isinstance(v, float) for v in t['value']):
            if not close(t['value'], d['value'] if isinstance(d['value'], list) else [d['value']]):
                differ(r, k, 'torch', t['value'], '| dt', d['value'])
        elif t['value'] != d['value']:
            differ(r, k, 'torch', t['value'], '| dt', d['value'])
    for k in D:
        if k not in T and not skip(k) and k not in errors and not (
                k.endswith(' mean loss') and k[:-len('mean loss')] + 'losses' in T):
            differ(r, k, 'MISSING in torch')
print('%d difference(s)' % differences)
sys.exit(1 if differences else 0)
