"""The adamw_step drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
from numpy_transformer import nn, optim


def adamw_step(param, grad, m, v, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    p = nn.Parameter(param.copy())
    p.grad = grad.copy()
    opt = optim.AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    sd = opt.state_dict()
    sd["state"] = {0: {"step": float(step), "exp_avg": m.copy(), "exp_avg_sq": v.copy()}}
    opt.load_state_dict(sd)
    opt.step()
    s = opt.state_dict()["state"][0]
    return p.data, s["exp_avg"], s["exp_avg_sq"]
