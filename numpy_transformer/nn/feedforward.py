"""The gated feed-forwards of today's blocks, ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``
(torch has no such classes; Hugging Face's names): :class:`GatedFeedForward` holds the maths once, and
each variant is a subclass naming its ``ffn`` choice and its activation — :class:`SwiGLU` (SiLU, as
``LlamaMLP``) and :class:`GeGLU` (GELU, the GELU-gated MLP of Gemma and T5 v1.1). The subclasses are
the gated choices of a block's ``ffn`` (:data:`nn.block.GATED_FFNS` finds them), so a new variant is
one subclass here. The functional pair is :func:`numpy_transformer.functional.gated_forward` /
``gated_backward``.
"""

from __future__ import annotations

import numpy as np

from ..utils.checks import as_generator, check_float_input, check_positive_int
from ._init import dtype_of
from .activations import GELU, SiLU
from .layers import Linear
from .module import Module

__all__ = ["GatedFeedForward", "SwiGLU", "GeGLU"]


class GatedFeedForward(Module):
    """A gated feed-forward: ``y = down_proj(act_fn(gate_proj(x)) * up_proj(x))``, (..., D) -> (..., D).

    Two projections D -> F, one of them gated by the activation, their elementwise product, and one
    projection F -> D. With the same parameter count as a ReLU feed-forward of width F' the usual
    choice is ``F = 2/3 F'`` (Llama: ``F = 8/3 D``, rounded). A subclass sets :attr:`ffn` (its name as
    a block's ``ffn`` choice), :attr:`activation` (the activation's name, for the torch twins) and
    :meth:`make_activation`.

    Parameters
    ----------
    d_model : int
        D, the input and output width.
    hidden_dim : int
        F, the width of the gated product.
    bias : bool
        Biases on the three projections (Llama has none; the default).
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        The three ``Linear`` layers draw from one generator in the order gate, up, down; each is
        initialised as ``torch.nn.Linear`` (U(-1/sqrt(fan_in), 1/sqrt(fan_in))).

    Attributes
    ----------
    gate_proj, up_proj : Linear (D -> F)
        ``state_dict`` keys ``gate_proj.weight`` (F, D), ``up_proj.weight`` (F, D) (and ``.bias`` (F,)).
    down_proj : Linear (F -> D)
        ``down_proj.weight`` (D, F) (and ``down_proj.bias`` (D,)).
    act_fn : Module
        The gate's activation (no parameters), as ``LlamaMLP.act_fn``.
    """

    ffn = None                   # the block's ``ffn`` name of the variant ("swiglu")
    activation = None            # the gate's activation ("silu"), as nn.activations names it

    def __init__(self, d_model, hidden_dim, bias=False, dtype=np.float32, seed=None):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.hidden_dim = check_positive_int(hidden_dim, "hidden_dim")
        if not isinstance(bias, (bool, np.bool_)):
            raise TypeError(f"bias must be a bool, got {bias!r}")
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        self.gate_proj = Linear(d_model, hidden_dim, bias=bool(bias), dtype=self.dtype, seed=rng)
        self.up_proj = Linear(d_model, hidden_dim, bias=bool(bias), dtype=self.dtype, seed=rng)
        self.down_proj = Linear(hidden_dim, d_model, bias=bool(bias), dtype=self.dtype, seed=rng)
        self.act_fn = self.make_activation()                                     # no parameters

    def make_activation(self):
        """The gate's activation module (a subclass's choice)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_activation()")

    def forward(self, x):
        """x (..., D) -> (..., D)."""
        x = check_float_input(x, "x", self.dtype, last_dim=self.d_model, shape_doc="(..., d_model)")
        a = self.act_fn(self.gate_proj(x))                                       # (..., F) act(gate)
        u = self.up_proj(x)                                                      # (..., F)
        self._save((a, u))
        return self.down_proj(a * u)                                             # (..., D)

    def backward(self, dout):
        """dout (..., D) -> dx (..., D); accumulates the projections' ``weight.grad`` (and ``bias.grad``).

        ``h = a * u`` is a product, so each factor gets the other times ``dh`` (``da = dh * u``,
        ``du = dh * a``); x feeds both projections, so its gradient is the sum of their two backwards
        (the derivation: :func:`numpy_transformer.functional.gated_backward`)."""
        a, u = self._take()
        dh = self.down_proj.backward(dout)                                       # (..., F)
        dx = self.gate_proj.backward(self.act_fn.backward(dh * u))               # (..., D) through the gate
        return dx + self.up_proj.backward(dh * a)                                # (..., D) + the up branch

    def extra_repr(self):
        return f"d_model={self.d_model}, hidden_dim={self.hidden_dim}, bias={self.gate_proj.bias is not None}"


class SwiGLU(GatedFeedForward):
    """SwiGLU: ``y = down_proj(silu(gate_proj(x)) * up_proj(x))`` (Llama's ``LlamaMLP``); the
    parameters and attributes of :class:`GatedFeedForward`, ``act_fn`` a :class:`SiLU`."""

    ffn = "swiglu"
    activation = "silu"

    def make_activation(self):
        return SiLU()


class GeGLU(GatedFeedForward):
    """GeGLU: ``y = down_proj(gelu(gate_proj(x)) * up_proj(x))`` (Shazeer 2020; Hugging Face's GELU-gated
    MLP, ``GemmaMLP``); the parameters and attributes of :class:`GatedFeedForward`, plus

    Parameters
    ----------
    approximate : {"none", "tanh"}
        The gate's GELU, as ``torch.nn.GELU``'s: exact (the default, the paper's), or the tanh form
        (Gemma's ``hidden_activation="gelu_pytorch_tanh"``). ``act_fn`` is that :class:`GELU`.
    """

    ffn = "geglu"
    activation = "gelu"

    def __init__(self, d_model, hidden_dim, bias=False, dtype=np.float32, seed=None, approximate="none"):
        self.approximate = approximate          # read by make_activation, which GELU checks
        super().__init__(d_model, hidden_dim, bias=bias, dtype=dtype, seed=seed)

    def make_activation(self):
        return GELU(approximate=self.approximate)

    def extra_repr(self):
        return f"{super().extra_repr()}, approximate={self.approximate!r}"
