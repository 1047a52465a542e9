"""The residual connection's backward (the encoder and decoder layers): z = x + f(x) sends dz to x
directly *and* through f."""

from . import Family

#: (the gradient assigned, the residual's identity path added to it), as the layer solutions write them
_PATHS = (("dh", "dout"), ("dx", "dh"), ("dh", "dz2"), ("dx", "dz1"), ("dh2", "dz3"), ("dh1", "dz2"),
          ("dtgt", "dz1"))

FAMILIES = (
    Family("residual_grad_dropped", "backward dropped a residual's identity path",
           "A residual z = x + f(x) sends dz to x twice: directly (the identity) and through f. Keeping "
           "only the branch's gradient drops the identity path.",
           "dx = dz + (the branch's backward of dz), for every residual.",
           tuple(((rf"(?m)^(\s+){lhs} = {res} \+ ", rf"\1{lhs} = "),) for lhs, res in _PATHS)),
)
