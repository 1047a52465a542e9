"""The torch twin of ``nt.nn``'s gated feed-forwards (torch has no such classes): Hugging Face's
``LlamaMLP``, ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``, written with ``torch.nn`` layers and
differentiated by autograd. One class for every variant: the activation is the twin of ours
(``nt.SwiGLU``'s ``act_fn`` is ``SiLU``: ``torch.nn.functional.silu``)."""

from __future__ import annotations

from torch import nn

from .activations import activation

__all__ = ["GatedFeedForward", "gated_like"]


class GatedFeedForward(nn.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))``: (..., D) -> (..., F) -> (..., D), as ``LlamaMLP``;
    ``act`` is a name, one of our activation modules or a callable (see :func:`.activations.activation`)."""

    def __init__(self, d_model, hidden_dim, bias=False, act="silu", device=None, dtype=None):
        super().__init__()
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.gate_proj = nn.Linear(d_model, hidden_dim, **kw)
        self.up_proj = nn.Linear(d_model, hidden_dim, **kw)
        self.down_proj = nn.Linear(hidden_dim, d_model, **kw)
        self.act_fn = activation(act)

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def gated_like(m):
    """The twin of our gated module ``m`` (``nt.SwiGLU`` ...): same sizes, biases and activation."""
    return GatedFeedForward(m.d_model, m.hidden_dim, bias=m.gate_proj.bias is not None, act=m.act_fn)
