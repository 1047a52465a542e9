"""The classic mistakes of the adamw_step drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("adamw_no_bias_correction", "no bias correction of m and v",
            "m and v start at zero, so early on they underestimate the gradient's moments by the "
            "factors 1 - beta1**t and 1 - beta2**t; Adam divides them out (the first steps would "
            "otherwise have the wrong size).",
            "m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t) with t = step + 1; update with "
            "m_hat / (sqrt(v_hat) + eps).",
        [
            ('m_hat = m / (1.0 - beta1 ** t)',
             'm_hat = m'),
            ('v_hat = v / (1.0 - beta2 ** t)',
             'v_hat = v'),
        ]),
    Mistake("adamw_l2_not_decoupled", "weight decay added to the gradient (Adam's L2), not decoupled",
            "grad + weight_decay * param is Adam with an L2 penalty (torch.optim.Adam's weight_decay): the "
            "decay then passes through m and v and is rescaled per element. AdamW shrinks the parameter "
            "directly, outside the adaptive step.",
            "param = param * (1 - lr * weight_decay) first; m and v use the plain gradient.",
        [
            ('param = param * (1.0 - lr * weight_decay)           # decoupled weight decay',
             'grad = grad + weight_decay * param'),
        ]),
    Mistake("adamw_decay_without_lr", "weight decay not multiplied by the learning rate",
            "torch's AdamW decays by lr * weight_decay per step: param *= 1 - lr * weight_decay (the "
            "paper's schedule multiplier is the learning rate's schedule).",
            "param = param * (1 - lr * weight_decay).",
        [
            ('param = param * (1.0 - lr * weight_decay)',
             'param = param * (1.0 - weight_decay)'),
        ]),
    Mistake("adamw_eps_inside_sqrt", "eps added inside the square root",
            "torch divides by sqrt(v_hat) + eps. sqrt(v_hat + eps) is another optimizer: with small "
            "gradients (v_hat ~ eps) the steps differ by orders of magnitude.",
            "param = param - lr * m_hat / (np.sqrt(v_hat) + eps).",
        [
            ('(np.sqrt(v_hat) + eps)',
             'np.sqrt(v_hat + eps)'),
        ]),
    Mistake("adamw_step_counted_from_zero", "bias corrections with t = step (counted from 0) instead of step + 1",
            "step is the number of updates taken before this one; this update is number step + 1. With "
            "t = step the first update divides by 1 - beta**0 = 0 (inf/NaN) and later ones are off by one.",
            "t = step + 1; m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t).",
        [
            ('t = step + 1 ',
             't = step '),
        ]),
)
