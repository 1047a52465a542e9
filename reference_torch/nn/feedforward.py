"""The torch twin of ``nt.SwiGLU`` (torch has no such class): Hugging Face's ``LlamaMLP``,
``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` with ``act_fn = torch.nn.SiLU()``, written with
``torch.nn`` layers and differentiated by autograd."""

from __future__ import annotations

from torch import nn

__all__ = ["SwiGLU"]


class SwiGLU(nn.Module):
    """``down_proj(silu(gate_proj(x)) * up_proj(x))``: (..., D) -> (..., F) -> (..., D), as ``LlamaMLP``."""

    def __init__(self, d_model, hidden_dim, bias=False, device=None, dtype=None):
        super().__init__()
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.gate_proj = nn.Linear(d_model, hidden_dim, **kw)
        self.up_proj = nn.Linear(d_model, hidden_dim, **kw)
        self.down_proj = nn.Linear(hidden_dim, d_model, **kw)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
