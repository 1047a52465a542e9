"""The train/eval mode as a context: :func:`eval_mode`.

``model.eval()`` switches every submodule to eval mode (dropout off) and leaves it there; an
evaluation in the middle of training must put each one back as it was, including a submodule the
caller had set apart (a frozen block kept in eval mode while the rest trains)::

    with nt.eval_mode(model):
        logits = model(ids)          # dropout off
    # every submodule is back in the mode it had before, also after an exception
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .module import Module

__all__ = ["eval_mode"]


@contextmanager
def eval_mode(model: Module) -> Iterator[Module]:
    """Put ``model`` and every submodule in eval mode for the ``with`` block, then restore each one's own
    previous mode (exception-safe).

    Parameters
    ----------
    model : Module
        Any module; its ``modules()`` are switched and restored one by one.

    Yields
    ------
    Module
        ``model`` itself.

    Raises
    ------
    TypeError
        ``model`` is not an ``nt.nn.Module``.
    """
    if not isinstance(model, Module):
        raise TypeError(f"eval_mode needs an nt.nn.Module (it switches its submodules' modes), got "
                        f"{type(model).__name__}")
    before = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, was in before:
            object.__setattr__(m, "training", was)
