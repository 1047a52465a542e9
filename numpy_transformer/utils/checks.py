"""Input validation with messages that teach: every error names the argument, what it got, what it expected."""

from __future__ import annotations

import contextlib
import math

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
FLOAT16 = np.dtype(np.float16)
# float16 is refused except inside numpy_transformer.amp's float16 working copy of a model, whose
# forward/backward run under ``allow_float16()`` (the norms, softmax and loss stay in float32 there).
_FLOAT16_ALLOWED = [0]
FLOAT16_HINT = ("or train in mixed precision: numpy_transformer.amp.MixedPrecision(model) runs a float16 copy "
                "with float32 master weights, norms, softmax and loss")


@contextlib.contextmanager
def allow_float16():
    """Within this block the modules accept float16 (``numpy_transformer.amp`` only)."""
    _FLOAT16_ALLOWED[0] += 1
    try:
        yield
    finally:
        _FLOAT16_ALLOWED[0] -= 1


def float16_allowed():
    return _FLOAT16_ALLOWED[0] > 0


def float_dtypes():
    return FLOAT_DTYPES + (FLOAT16,) if float16_allowed() else FLOAT_DTYPES


def as_float_dtype(dtype, name="dtype"):
    """Normalise a dtype argument to float32/float64, refusing anything else with a clear message."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{name} must be np.float32 or np.float64, got {dtype!r}") from exc
    if dt == np.float16 and float16_allowed():
        return dt
    if dt == np.float16:
        raise TypeError(f"{name}=float16 is not supported (softmax and LayerNorm lose too much precision); "
                        f"use np.float32 or np.float64, {FLOAT16_HINT}")
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be np.float32 or np.float64, got {dt}")
    return dt


def as_generator(seed):
    """``seed`` (None, int >= 0, SeedSequence or Generator) as a ``numpy.random.Generator``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed < 0:
        raise ValueError(f"seed must be a non-negative int (or None, or a numpy.random.Generator), got {seed}")
    if seed is None or isinstance(seed, (int, np.integer, np.random.SeedSequence)):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be None, an int or a numpy.random.Generator, got {type(seed).__name__}")


def check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def check_number(value, name, low=None, high=None, low_open=False, high_open=False, allow_inf=False):
    """A real number (not bool, not NaN, finite unless ``allow_inf``) within the given bounds, as a float.

    Raises ValueError naming ``name``, the bounds and the value received (a string, None or NaN included).
    """
    if low is not None and high is not None:
        cond = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        cond = f"{'>' if low_open else '>='} {low:g}"
    elif high is not None:
        cond = f"{'<' if high_open else '<='} {high:g}"
    else:
        cond = "finite"
    want = cond if cond != "finite" else "a finite number"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be {'a number ' + cond if cond != 'finite' else want}, got {value!r} "
                         f"({type(value).__name__})")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    return v


def check_probability(p, name="dropout"):
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating, np.integer)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} probability must be a number in [0, 1], got {p!r}")
    return float(p)


def _as_array_refusing_float16(x, name):
    """``x`` as an ndarray; float16 is refused with a message saying how to convert it."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.dtype == np.float16 and not float16_allowed():
        raise TypeError(f"{name} has dtype float16, which is not supported; convert it with "
                        f"{name}.astype(np.float32), {FLOAT16_HINT}")
    return x


def check_float_input(x, name, dtype, ndim=None, last_dim=None, shape_doc=""):
    """Return ``x`` as an ndarray of the module's float ``dtype`` after checking rank and last dim.

    Non-contiguous and read-only arrays are accepted (nothing here writes into an input). Integer,
    bool and object arrays are refused: a silent cast would hide a bug such as passing token ids
    where embeddings are expected. A float array of the other precision is refused too: NumPy would
    silently promote a whole float32 layer to float64.
    """
    x = _as_array_refusing_float16(x, name)
    if x.dtype not in float_dtypes():
        raise TypeError(f"{name} must be a floating-point array of dtype {dtype}, got dtype {x.dtype}"
                        + (" (token ids go to an Embedding, not here)" if x.dtype.kind in "iu" else ""))
    if x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but the module's parameters are {dtype}; convert with "
                        f"{name}.astype(np.{dtype}) or build the module with dtype=np.{x.dtype}")
    ndims = tuple(ndim) if isinstance(ndim, (tuple, list)) else (ndim,)
    if ndim is not None and x.ndim not in ndims:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndims))} dimensions {shape_doc}, got shape {x.shape}")
    if last_dim is not None and (x.ndim == 0 or x.shape[-1] != last_dim):
        raise ValueError(f"{name} must have last dimension {last_dim} {shape_doc}, got shape {x.shape}")
    return x


def check_float_array(x, name):
    """``x`` as a float32 or float64 ndarray, for the dtype-free modules (ReLU, GELU, Dropout).

    Integer, bool, object and float16 arrays are refused with TypeError (NumPy would compute in
    another dtype, or fail deep inside an elementwise kernel).
    """
    x = _as_array_refusing_float16(x, name)
    if x.dtype not in float_dtypes():
        raise TypeError(f"{name} must be a float32 or float64 array, got dtype {x.dtype}")
    return x


def check_ids(ids, name, num_embeddings):
    """Integer ids in ``[0, num_embeddings)``; NumPy would wrap negative ids silently, so refuse them."""
    if not isinstance(ids, np.ndarray):
        ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array of token ids, got dtype {ids.dtype}")
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_embeddings:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{name} must lie in [0, {num_embeddings}), got id {bad} "
                             f"(min {lo}, max {hi}); negative ids are not wrapped around")
    return ids


def check_token_batch(ids, name="ids", vocab_size=None, shape_doc="(B, S)"):
    """A batch of token ids ``(B, S)``, the one check every model and ``generate`` make of their ids: an
    integer array (TypeError), two axes and a non-empty batch and sequence (ValueError), and, given
    ``vocab_size``, every id in ``[0, vocab_size)`` (IndexError, :func:`check_ids`). ``shape_doc`` is the
    shape the shape error names. Returns ``ids`` as an array; sequence-length limits stay the model's."""
    if not isinstance(ids, np.ndarray):
        ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array of token ids, got dtype {ids.dtype}")
    if ids.ndim != 2:
        raise ValueError(f"{name} must have shape {shape_doc}, got shape {ids.shape}")
    if ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"{name} must have a non-empty batch and sequence, got shape {ids.shape}")
    return ids if vocab_size is None else check_ids(ids, name, vocab_size)


def check_mask(mask, name, shapes, dtype):
    """A mask that is bool or float and has one of the allowed ``shapes``; float masks take ``dtype``."""
    if mask is None:
        return None
    if not isinstance(mask, np.ndarray):
        mask = np.asarray(mask)
    if mask.dtype != np.bool_ and mask.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a bool array (True = may not attend) or a float32/float64 array "
                        f"(added to the scores), got dtype {mask.dtype}"
                        + (" (an int 0/1 mask? convert with mask.astype(bool))" if mask.dtype.kind in "iu" else ""))
    if tuple(mask.shape) not in [tuple(s) for s in shapes]:
        allowed = " or ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"{name} must have shape {allowed}, got {tuple(mask.shape)}")
    if mask.dtype != np.bool_ and mask.dtype != dtype:
        mask = mask.astype(dtype)
    return mask


def check_grad(dout, name, expected_shape, dtype):
    """An upstream gradient of exactly the forward output's shape and dtype."""
    if not isinstance(dout, np.ndarray):
        dout = np.asarray(dout)
    if tuple(dout.shape) != tuple(expected_shape):
        raise ValueError(f"{name} must have the shape of the forward output {tuple(expected_shape)}, "
                         f"got {tuple(dout.shape)}")
    if dout.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype} like the forward output, got {dout.dtype}")
    return dout


def check_attention_mask(mask, shape, name="attention_mask"):
    """Hugging Face's ``attention_mask`` (B, T) of 0/1, 1 = a real token, padded on the **left**: as a
    bool array (True = real). Refuses another shape, a float/object dtype, values other than 0/1, and
    right padding (a 0 after a 1 in a row: the decoder-only models count positions from a row's first
    real token and append new tokens at the right, so padding must come first)."""
    if not isinstance(mask, np.ndarray):
        mask = np.asarray(mask)
    if mask.dtype != np.bool_ and mask.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer or bool array of 0/1 (1 = a real token, 0 = padding), got "
                        f"dtype {mask.dtype}")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (one 0/1 per position of ids, B x T), got "
                         f"shape {tuple(mask.shape)}")
    if mask.dtype != np.bool_:
        if mask.size and (mask.min() < 0 or mask.max() > 1):
            raise ValueError(f"{name} must hold only 0 (padding) and 1 (real token), got values in "
                             f"[{mask.min()}, {mask.max()}]")
        mask = mask.astype(bool)
    right = np.flatnonzero((mask[:, :-1] & ~mask[:, 1:]).any(axis=1)) if mask.shape[1] > 1 else []
    if len(right):
        raise ValueError(f"{name} row {int(right[0])} has a 0 after a 1 (right padding, "
                         f"{mask[right[0]].astype(int).tolist()}): pad prompts on the left, as decoder-only "
                         "models expect (Hugging Face: tokenizer.padding_side = 'left')")
    return mask
