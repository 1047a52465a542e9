"""The base machinery: :class:`Parameter` (an array and its accumulated gradient), :class:`Module`
(registration of parameters, buffers and sub-modules by attribute assignment; ``__call__``; the
forwards' caches, ``_save``/``_take``; traversal; ``state_dict``/``load_state_dict``; train/eval;
trace hooks), :class:`ModuleList` and :class:`IncompatibleKeys`.

The caches, and why a module may be shared
------------------------------------------
Each forward saves what its backward needs (``self._save(cache)``) and each backward consumes it
(``self._take()``). A module may be used several times (one ``nt.GELU`` for two layers, a ``Linear``
applied twice, as torch allows): each use pushes its own cache on the module's stack, and the
gradients of shared parameters add up (``Parameter.accumulate``). Which cache does a backward take?

* A *top-level* forward (one not made from inside another module's forward) starts a *pass*; every
  forward it makes belongs to that pass, and each cache is tagged with it.
* A top-level backward consumes the pass of its module's most recent cache (or, for a module that
  keeps none, of its latest forward); every backward it makes takes the most recent cache *of that
  pass*. So two layers called one after the other and sharing a GELU can be backpropagated in either
  order, and within one pass a module used twice gets its backwards in reverse order of its
  forwards -- the order a parent's backward, walking its forward backwards, calls them anyway.
* Memory: calling the same top-level module again starts a new pass of it, and a module saving a
  cache for that new pass drops its caches of the previous one (an evaluation forward is never
  followed by a backward). So a model evaluated in a loop keeps one set of caches, as with a single
  cache per module; a module called at top level twice keeps only the second call's cache.

Threads and forked processes
----------------------------
The running pass (``_TAPE``: the forward's tag, the backward's depth and the pass it consumes) is
kept **per thread** (``threading.local``), as are the hooks' subscribers (:mod:`.hooks`): threads each
training their own model never see each other's passes and get, bit for bit, the results of the same
runs done one after the other. Passes are numbered process-wide (``_CALLS``), so no two threads' tags
coincide. One module
run by two threads *at once* is not supported (a new top-level call drops the caches the other
thread's call left, as above, and both add into the same ``.grad``). A child forked from a threaded
process has the state of the forking thread only, which matches the stack it goes on running; the
other threads' passes are gone with those threads.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import weakref
from collections import OrderedDict
from typing import Iterator, NamedTuple

import numpy as np

from . import hooks

__all__ = ["Parameter", "IncompatibleKeys", "Module", "ModuleList", "replaying_backward_pass"]


class _Tape(threading.local):
    """The pass running now *in this thread* (one instance, ``_TAPE``; each thread sees its own
    attributes). A pass is tagged ``(call number, weakref to its top-level module)``."""

    def __init__(self):                 # run once in each thread that touches _TAPE
        self.forward_tag = None         # the running forward pass's tag (None: no forward running)
        self.backward_depth = 0         # how deeply backwards are nested (0: none running)
        self.backward_tag = None        # the pass the running top-level backward consumes


_TAPE = _Tape()
_CALLS = itertools.count(1)   # numbers the passes, process-wide (one C call: no two threads draw the same)


def _new_tag(module):
    return (next(_CALLS), weakref.ref(module))


@contextlib.contextmanager
def replaying_backward_pass():
    """Run a forward again inside a backward: activation checkpointing's recomputation
    (:func:`numpy_transformer.nn.recompute.backward_layer`).

    While the block runs, in the calling thread, forwards are tagged with the pass that the running
    top-level backward consumes (so the backwards nested in that backward take exactly the caches the
    replay leaves), and no hook subscriber receives anything (``nt.trace`` saw the first forward
    already: :func:`.hooks.suspended`).
    Outside any backward, the forwards start their own pass as usual. Other threads are not affected.

    Yields
    ------
    None
    """
    tape = _TAPE
    forward_tag = tape.forward_tag
    if tape.backward_tag is not None:
        tape.forward_tag = tape.backward_tag
    try:
        with hooks.suspended():
            yield
    finally:
        tape.forward_tag = forward_tag


class Parameter:
    """A trainable array: ``.data`` holds the value, ``.grad`` the accumulated gradient (or None).

    ``requires_grad=False`` freezes it, as torch: backwards give it no gradient (``accumulate`` does
    nothing), so ``.grad`` stays None and the optimizers, which skip parameters without a gradient,
    leave it unchanged (e.g. ``Embedding.from_pretrained(..., freeze=True)``).
    """

    def __init__(self, data, requires_grad=True):
        self.data = np.asarray(data)
        self.grad = None
        self.requires_grad = bool(requires_grad)

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def accumulate(self, grad, owned=False):
        """Add ``grad`` into ``.grad`` (allocating it on the first call), as torch's autograd does.

        ``owned=True`` says ``grad`` is a fresh array nobody else holds (what the functional backwards
        return), so the first call may keep it instead of copying it. A frozen parameter
        (``requires_grad=False``) ignores the call.
        """
        if not self.requires_grad:
            return
        if self.grad is None:
            fresh = owned and grad.dtype == self.data.dtype and grad.flags.c_contiguous and grad.flags.writeable
            self.grad = grad if fresh else np.array(grad, dtype=self.data.dtype, copy=True)
        else:
            self.grad += grad

    def __repr__(self):
        frozen = "" if self.requires_grad else ", requires_grad=False"
        return f"Parameter(shape={self.data.shape}, dtype={self.data.dtype}{frozen})"


class IncompatibleKeys(NamedTuple):
    missing_keys: list
    unexpected_keys: list


class Module:
    """Base class: registers parameters, buffers and sub-modules by attribute assignment, like torch.

    Subclasses define ``forward`` and ``backward``. Every subclass's ``forward`` and ``backward`` are
    wrapped to tag the caches with their pass (see the module docstring: a shared module keeps one
    cache per use, and a new call of a top-level module drops the leftovers of its last). When
    anyone listens to the hooks (:mod:`.hooks`; ``nt.trace`` does), ``__call__`` reports each forward
    output and every subclass's ``backward`` the gradient it returns (the wrapping happens once, in
    ``__init_subclass__``, so the layers' code stays plain maths).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        forward = cls.__dict__.get("forward")
        if forward is not None and not getattr(forward, "_counted", False):
            @functools.wraps(forward)
            def counted_forward(self, *args, **kw):
                tape = _TAPE                                 # this thread's
                tag = tape.forward_tag
                top = tag is None
                if top:
                    tag = tape.forward_tag = _new_tag(self)  # a top-level forward: a new pass
                self._drop_stale(tag)
                object.__setattr__(self, "_last_tag", tag)
                pending = len(self._caches)
                try:
                    return forward(self, *args, **kw)
                except BaseException:
                    del self._caches[pending:]   # a forward that raises leaves no cache of its own behind
                    raise
                finally:
                    if top:
                        tape.forward_tag = None
            counted_forward._counted = True
            cls.forward = counted_forward
        backward = cls.__dict__.get("backward")
        if backward is not None and not getattr(backward, "_traced", False):
            @functools.wraps(backward)
            def traced_backward(self, *args, **kw):
                caches = list(self._caches)
                tape = _TAPE                             # this thread's
                depth = tape.backward_depth
                if depth == 0:                           # a top-level backward: which pass it consumes
                    tape.backward_tag = caches[-1][0] if caches else self._last_tag
                tape.backward_depth = depth + 1
                try:
                    grad = backward(self, *args, **kw)
                except Exception as exc:
                    # A refused call (wrong gradient shape or dtype) must not cost the forward's cache:
                    # the next, correct backward still works.
                    self._caches[:] = caches
                    if len(caches) > 1 and hasattr(exc, "add_note"):     # Python >= 3.11
                        exc.add_note(f"({type(self).__name__} has {len(caches)} forwards waiting for their "
                                     "backward; in one forward pass each backward takes the most recent one: "
                                     "call them in reverse order of the forwards)")
                    raise
                finally:
                    tape.backward_depth = depth
                    if depth == 0:
                        tape.backward_tag = None
                if hooks.active():
                    hooks.backward(self, grad)
                return grad
            traced_backward._traced = True
            cls.backward = traced_backward

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_caches", [])    # (pass tag, cache) per forward awaiting its backward
        object.__setattr__(self, "_last_tag", None)  # the pass of the latest forward

    # -- registration --------------------------------------------------------------------------
    def __setattr__(self, name, value):
        for table in ("_parameters", "_modules", "_buffers"):
            self.__dict__.get(table, {}).pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for table in ("_parameters", "_modules", "_buffers"):
            d = self.__dict__.get(table)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter or None) under ``name``; None keeps the slot empty, as torch."""
        if param is None:
            self.__dict__.get("_parameters").pop(name, None)
            object.__setattr__(self, name, None)
        else:
            setattr(self, name, param)

    def register_buffer(self, name, array, persistent=True):
        """A non-trainable array; in ``state_dict()`` only when ``persistent``."""
        self.__dict__.pop(name, None)
        self._buffers[name] = array
        if not persistent:
            self._non_persistent.add(name)

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        out = self.forward(*args, **kwargs)
        if hooks.active():
            hooks.forward(self, out, args)
        return out

    def forward(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, dout):  # pragma: no cover - abstract
        raise NotImplementedError

    def _drop_stale(self, tag):
        """Drop the caches of an earlier pass of the same top-level module (that forward was never
        followed by a backward: an evaluation, a refused call) and of top-level modules that are gone."""
        call, root = tag[0], tag[1]()
        self._caches[:] = [(t, c) for t, c in self._caches
                           if t[1]() is not None and (t[1]() is not root or t[0] == call)]

    def _save(self, cache):
        """Keep ``cache`` for the backward of this forward (pushed: a shared module has one per use)."""
        tag = _TAPE.forward_tag
        if tag is None:                      # saved outside a counted forward (one patched in): its own pass
            tag = _new_tag(self)
            self._drop_stale(tag)
        self._caches.append((tag, cache))

    def _take(self):
        """The cache for this backward, removed so that one backward too many is caught: the most recent
        one of the pass the running top-level backward consumes."""
        want = _TAPE.backward_tag
        for i in range(len(self._caches) - 1, -1, -1):
            tag, cache = self._caches[i]
            if want is None or tag[0] == want[0]:
                del self._caches[i]
                return cache
        raise RuntimeError(f"{type(self).__name__}.backward() called before forward(), or more times than "
                           "forward() was called: each backward consumes one forward's cache, the most recent "
                           "first (a module used twice in one forward pass takes two backwards). Call forward "
                           "again first; note that calling a top-level module again drops the caches its "
                           "previous call left")

    # -- traversal -----------------------------------------------------------------------------
    def named_modules(self, prefix="") -> Iterator:
        yield prefix, self
        for name, mod in self._modules.items():
            yield from mod.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix="", recurse=True) -> Iterator:
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, mod in mods:
            for name, p in mod._parameters.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mprefix}.{name}" if mprefix else name), p

    def parameters(self, recurse=True):
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix=""):
        for mprefix, mod in self.named_modules(prefix):
            for name, b in mod._buffers.items():
                yield (f"{mprefix}.{name}" if mprefix else name), b

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self):
        """An ordered dict ``name -> ndarray`` of parameters and persistent buffers (torch's keys).

        The arrays are the module's own (no copy), as torch's tensors share storage.
        """
        sd = OrderedDict()
        for mprefix, mod in self.named_modules():
            for name, p in mod._parameters.items():
                sd[f"{mprefix}.{name}" if mprefix else name] = p.data
            for name, b in mod._buffers.items():
                if name not in mod._non_persistent:
                    sd[f"{mprefix}.{name}" if mprefix else name] = b
        return sd

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays from ``state_dict`` into this module's parameters and persistent buffers.

        Everything is validated before anything is written, so a refused dict leaves the module as it
        was. Values are converted to each parameter's dtype (as torch's ``copy_``) when they are
        floating point; any other dtype is refused.

        Raises
        ------
        TypeError
            ``state_dict`` is not a mapping, or an array is not floating point (float16, float32 and
            float64 are accepted and converted; int, bool, object, None are refused).
        KeyError
            ``strict`` and keys are missing or unexpected (the message names them).
        ValueError
            An array's shape differs from the parameter's (the message names the key and both shapes).

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            hint = (" (a checkpoint file? use nt.training.checkpoint.load_checkpoint(path).load_model(model))"
                    if isinstance(state_dict, (str, bytes)) or hasattr(state_dict, "__fspath__") else "")
            raise TypeError(f"state_dict must be a mapping of name -> array, like the one state_dict() returns; "
                            f"got {type(state_dict).__name__}{hint}")
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"Error loading state_dict into {type(self).__name__}: "
                           f"missing keys {missing}, unexpected keys {unexpected}")
        converted = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            value = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
            if value.dtype.kind != "f":
                raise TypeError(f"state_dict[{key!r}] must be a floating-point array of shape {target.shape}, "
                                f"got dtype {value.dtype}" + (f" ({state_dict[key]!r})" if value.ndim == 0 else ""))
            if value.shape != target.shape:
                raise ValueError(f"state_dict[{key!r}] has shape {value.shape}, but the module expects "
                                 f"{target.shape}")
            converted[key] = value
        for mprefix, mod in self.named_modules():
            for table in (mod._parameters, mod._buffers):
                for name in table:
                    key = f"{mprefix}.{name}" if mprefix else name
                    if key in converted:
                        dest = table[name].data if table is mod._parameters else table[name]
                        dest[...] = converted[key]
        return IncompatibleKeys(missing, unexpected)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad[...] = 0

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, mod in self._modules.items():
            child = repr(mod).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        return "\n".join(lines) + (")" if len(lines) == 1 else "\n)")

    def extra_repr(self):
        return ""


class ModuleList(Module):
    """A list of modules registered as ``0``, ``1``, ... (state_dict keys ``layers.0.…``, as torch)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self._modules[str(len(self._modules))] = module
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())
