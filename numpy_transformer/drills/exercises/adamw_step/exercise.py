"""The adamw_step drill: one step of torch.optim.AdamW for one parameter (decoupled weight decay, the
moments, the bias corrections with t = step + 1, eps outside the square root). Its reference is the
library's ``optim.AdamW`` (itself checked against torch's) with the case's state loaded."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 140
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'adamw_step'}
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('adamw',)


# (shape, step, grad scale, lr, betas, eps, weight_decay)
_ADAMW_EDGES = [((1,), 0, 1.0, 1e-3, (0.9, 0.999), 1e-8, 1e-2), ((3, 4), 0, 1e-6, 1e-2, (0.9, 0.999), 1e-8, 0.1),
                ((5,), 1, 1.0, 1e-3, (0.9, 0.999), 1e-8, 0.0), ((2, 3), 9, 1e-4, 1e-2, (0.8, 0.95), 1e-6, 0.05),
                ((4, 2), 999, 1e-2, 3e-4, (0.9, 0.999), 1e-8, 0.1), ((2, 2, 3), 3, 1e-6, 1e-1, (0.9, 0.98), 1e-8, 0.01)]


def _draw_adamw(rng, i):
    if i < len(_ADAMW_EDGES):
        shape, step, gs, lr, betas, eps, wd = _ADAMW_EDGES[i]
    else:
        shape = tuple(int(n) for n in rng.integers(1, 6, size=int(rng.integers(1, 3))))
        step = int(rng.choice([0, 0, 1, 2, 5, 20, 100, 1000]))
        gs = float(rng.choice([1.0, 1e-2, 1e-4, 1e-6]))
        lr = float(rng.choice([1e-3, 1e-2, 3e-4, 0.1]))
        betas = (0.9, 0.999) if rng.random() < 0.7 else (float(rng.uniform(0.5, 0.95)), float(rng.uniform(0.9, 0.9999)))
        eps = float(rng.choice([1e-8, 1e-6]))
        wd = 0.0 if rng.random() < 0.2 else float(rng.choice([1e-2, 0.1, 0.05]))
    param = rng.standard_normal(shape)
    grad = gs * rng.standard_normal(shape)
    if step == 0:                              # no update yet: the moments are still zeros
        m, v = np.zeros(shape), np.zeros(shape)
    else:                                      # moments of gradients of that scale
        m = gs * 0.5 * rng.standard_normal(shape)
        v = gs * gs * rng.uniform(0.1, 2.0, size=shape)
    tags = ["tiny gradients (eps matters)"] if gs <= 1e-4 else []
    return Case({"param": param, "grad": grad, "m": m, "v": v, "step": step, "lr": lr, "betas": betas,
                 "eps": eps, "weight_decay": wd},
                describe(f"param {shape_text(param)}", f"step={step}", f"lr={lr:g}", f"wd={wd:g}",
                      f"|grad|~{gs:g}"), tags, {},
                {"step": "the first step (step=0)" if step == 0 else "a later step (step > 0)",
                 "weight decay": wd > 0})


def _run_adamw(rec, c):
    res = rec.call("adamw_step", c["param"], c["grad"], c["m"], c["v"], c["step"], lr=c["lr"], betas=c["betas"],
                   eps=c["eps"], weight_decay=c["weight_decay"])
    param, m, v = rec.unpack("adamw_step", res, ["param", "m", "v"])
    rec.output("param", param)
    rec.output("m", m)
    rec.output("v", v)


def _ref_adamw():
    """The library's ``optim.AdamW`` on a Parameter holding a copy, its state set to (step, m, v)."""
    from ....nn.module import Parameter
    from ....optim import AdamW

    def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        p = Parameter(np.array(param, dtype=np.float64))
        p.grad = np.array(grad, dtype=np.float64)
        opt = AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        opt.state[id(p)] = {"step": float(step), "exp_avg": np.array(m, dtype=np.float64),
                            "exp_avg_sq": np.array(v, dtype=np.float64)}
        opt.step()
        state = opt.state[id(p)]
        return p.data, state["exp_avg"], state["exp_avg_sq"]
    return SimpleNamespace(adamw_step=adamw_step)


EXERCISE = Exercise(
    name="adamw_step", difficulty="easy", minutes=10,
    covers="one torch.optim.AdamW update: decoupled weight decay, the moments, bias corrections with "
           "t = step + 1, eps outside the sqrt",
    aliases=('adamw', 'adam'),
    functions=("adamw_step",),
    outputs=(("param", "adamw_step"), ("m", "adamw_step"), ("v", "adamw_step")),
    library=("optim.AdamW",), reference_name="numpy_transformer.optim.AdamW (verified)",
    draw=_draw_adamw, run=_run_adamw, reference=_ref_adamw, n_edge=len(_ADAMW_EDGES),
    topic="optimisation",
)
