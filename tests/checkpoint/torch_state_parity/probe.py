"""PyTorch half of the state-dict / checkpoint side-by-side probe (round 7c).

Run: /root/venv/bin/python probe.py   (one process, CPU, float64) -> torch_state.json.
probe.cc (target torch_state_probe, not run by ctest) writes dt_state.json the same way and
compare.py prints the differences. For every optimizer x scheduler case: an uninterrupted run
of 6 steps ('whole') and a run of 3 steps whose optimizer and scheduler states are saved, then
loaded into a fresh model, optimizer (built with 7 times the learning rate: the loaded one must
win) and scheduler, which take 3 more steps ('resumed'). Parameter 'u' gets a gradient only from
step 3 on, so at the save it has no optimizer state. Recorded: each step's loss, learning rate
and parameters, and the optimizer's and scheduler's state at the end; the flattened state-dict
key names of torch.distributed.checkpoint.state_dict; the errors of loads with a missing, extra
or mis-shaped entry. The model and data are the same formulas in probe.cc.
"""
import json, math, os
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (get_model_state_dict, get_optimizer_state_dict,
                                                     StateDictOptions)

torch.set_default_dtype(torch.float64)
out = []


def rec(case, v):
    if isinstance(v, torch.Tensor):
        v = v.detach().reshape(-1).tolist()
    elif isinstance(v, (int, float)):
        v = [float(v)]
    out.append({'case': case, 'value': v})


def rec_error(case, e):
    out.append({'case': case, 'error': str(e)[:200]})


class Net(torch.nn.Module):
    # loss_t = sum((tanh(w * x_t) + b - y_t)^2), plus sum(u^2 x_t[0]) from step 3 on.
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.3 * math.sin(0.37 * k + 0.2) for k in range(12)]).reshape(4, 3))
        self.b = torch.nn.Parameter(torch.tensor([0.1 * (k + 1) for k in range(3)]))
        self.u = torch.nn.Parameter(torch.tensor([0.5 - 0.2 * k for k in range(3)]))

    def loss(self, t):
        x = torch.tensor([[math.sin(0.3 * i + 0.7 * j + 0.5 * t) for j in range(3)] for i in range(4)])
        y = torch.tensor([[math.cos(0.2 * i - 0.4 * j + 0.3 * t) for j in range(3)] for i in range(4)])
        loss = torch.sum(torch.square(torch.tanh(self.w * x) + self.b - y))
        if t >= 3:
            loss = loss + torch.sum(self.u * self.u * x[0])
        return loss


OPTS = {
    'adamw': lambda ps, lr: torch.optim.AdamW(ps, lr=lr, weight_decay=0.1),
    'sgd': lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9, nesterov=True, weight_decay=0.01),
}
LR = {'adamw': 0.01, 'sgd': 0.05}
S = torch.optim.lr_scheduler
SCHEDS = {
    'none': None,
    'step': lambda o: S.StepLR(o, step_size=2, gamma=0.5),
    'cosine': lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=1e-3),
    'linear': lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=3),
    'lambda': lambda o: S.LambdaLR(o, lambda e: 0.9 ** e),
    'sequential': lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.5, 1.0, 2), S.CosineAnnealingLR(o, 4)], [2]),
}
SLOTS = {'adamw': ['exp_avg', 'exp_avg_sq'], 'sgd': ['momentum_buffer']}


def build(opt_name, sched_name, lr):
    m = Net()
    o = OPTS[opt_name](m.parameters(), lr)
    s = SCHEDS[sched_name](o) if SCHEDS[sched_name] else None
    return m, o, s


def train(case, m, o, s, steps, set_lr=None):
    for t in steps:
        if set_lr is not None and t == 3:
            for g in o.param_groups:
                g['lr'] = set_lr
        o.zero_grad()
        loss = m.loss(t)
        loss.backward()
        rec('%s/step%d/lr' % (case, t), o.param_groups[0]['lr'])
        o.step()
        if s:
            s.step()
        rec('%s/step%d/loss' % (case, t), loss)
        for n, p in m.named_parameters():
            rec('%s/step%d/%s' % (case, t, n), p)


def final(case, opt_name, m, o, s):
    names = {id(p): n for n, p in m.named_parameters()}
    for p in m.parameters():
        st = o.state.get(p, {})
        n = names[id(p)]
        rec('%s/final/state/%s/step' % (case, n), float(st['step']) if 'step' in st else -1.0)
        for slot in SLOTS[opt_name]:
            rec('%s/final/state/%s/%s' % (case, n, slot), st[slot] if slot in st else [])
    g = o.param_groups[0]
    rec('%s/final/lr' % case, g['lr'])
    rec('%s/final/initial_lr' % case, g.get('initial_lr', -1.0))
    if s:
        rec('%s/final/sched/last_epoch' % case, s.last_epoch)
        rec('%s/final/sched/last_lr' % case, s.get_last_lr()[0])
        # SequentialLR keeps no base_lrs of its own: its schedulers' (the group's initial_lr).
        rec('%s/final/sched/base_lr' % case, getattr(s, 'base_lrs', [g.get('initial_lr')])[0])


for opt_name in OPTS:
    for sched_name in SCHEDS:
        variants = [('', None)] + ([('setlr', 0.003)] if sched_name == 'none' else [])
        for suffix, set_lr in variants:
            case = '%s/%s%s' % (opt_name, sched_name, '/' + suffix if suffix else '')
            m, o, s = build(opt_name, sched_name, LR[opt_name])
            train(case + '/whole', m, o, s, range(6), set_lr)
            final(case + '/whole', opt_name, m, o, s)
            m, o, s = build(opt_name, sched_name, LR[opt_name])
            train(case + '/resumed', m, o, s, range(3))
            model_sd = {k: v.clone() for k, v in m.state_dict().items()}
            opt_sd = o.state_dict()
            sched_sd = s.state_dict() if s else None
            rec(case + '/saved/state_keys', sorted(str(k) for k in opt_sd['state']))
            m, o, s = build(opt_name, sched_name, 7 * LR[opt_name])
            m.load_state_dict(model_sd)
            o.load_state_dict(opt_sd)
            if s:
                s.load_state_dict(sched_sd)
            rec(case + '/loaded/lr', o.param_groups[0]['lr'])
            train(case + '/resumed', m, o, s, range(3, 6), set_lr)
            final(case + '/resumed', opt_name, m, o, s)

# Flattened key names (DCP's get_*_state_dict, one process).
os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
os.environ.setdefault('MASTER_PORT', '29517')
dist.init_process_group('gloo', rank=0, world_size=1)
m, o, s = build('adamw', 'step', 0.01)
m.loss(3).backward()
o.step()
s.step()
msd = get_model_state_dict(m)
osd = get_optimizer_state_dict(m, o, options=StateDictOptions(flatten_optimizer_state_dict=True))
rec('keys/model', sorted(msd))
rec('keys/optimizer', sorted(osd))
rec('keys/scheduler', sorted(k for k in s.state_dict()))
dist.destroy_process_group()

# Loads of a state with a missing, an extra or a mis-shaped entry, strict and not.
m = Net()
sd = {k: v.clone() for k, v in m.state_dict().items()}
for name, bad in [('missing', {k: v for k, v in sd.items() if k != 'u'}),
                  ('extra', dict(sd, z=torch.zeros(2))),
                  ('misshaped', dict(sd, b=torch.zeros(4)))]:
    for strict in (True, False):
        case = 'errors/model/%s/%s' % (name, 'strict' if strict else 'nonstrict')
        try:
            r = Net().load_state_dict(bad, strict=strict)
            rec(case, 'ok missing=%s unexpected=%s' % (list(r.missing_keys), list(r.unexpected_keys)))
        except Exception as e:
            rec_error(case, e)
# An optimizer state with a mis-shaped exp_avg: PyTorch loads it without a check.
m, o, s = build('adamw', 'none', 0.01)
m.loss(0).backward()
o.step()
sd = o.state_dict()
sd['state'][1]['exp_avg'] = torch.zeros(4)
m2, o2, _ = build('adamw', 'none', 0.01)
try:
    o2.load_state_dict(sd)
    rec('errors/optim/misshaped/load', 'ok')
except Exception as e:
    rec_error('errors/optim/misshaped/load', e)
# An AdamW state loaded into SGD.
m3, o3, _ = build('sgd', 'none', 0.05)
try:
    o3.load_state_dict(o.state_dict())
    rec('errors/optim/other_optimizer/load', 'ok')
except Exception as e:
    rec_error('errors/optim/other_optimizer/load', e)

json.dump(out, open('torch_state.json', 'w'), indent=0)
print('wrote torch_state.json: %d entries' % len(out))
