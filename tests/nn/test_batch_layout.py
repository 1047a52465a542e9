"""``nn/_layout.BatchLayout``: the batch-first / sequence-first / unbatched conversion written once.

* each layout goes in and comes back out unchanged, by views (no copy), and an array passed several
  times (self-attention's query, key and value) stays one array;
* an upstream gradient is checked in the caller's layout, the message naming ``dout`` and that shape;
* the modules that accept the three layouts (``MultiheadAttention``, the encoder, the decoder) convert
  through it and nowhere else: no ``swapaxes`` of their own, in ``nn/`` or ``models/``;
* the sdpa backward reads its cache by field name, not by a positional unpack of all nine fields; no
  backward in ``functional/`` or ``nn/`` unpacks a cache (or what its forward saved) into more than
  five names, which would break silently when a field is added;
* the cast of a Python number to a NumPy scalar of a dtype is written once (``as_scalar``).
"""

import ast
import inspect
import os
import re

import numpy as np
import pytest
from _paths import REPO_ROOT

from numpy_transformer.functional import attention as sdpa
from numpy_transformer.nn._layout import BatchLayout

ROOT = str(REPO_ROOT)
rng = np.random.default_rng(0)


@pytest.mark.parametrize("shape, batch_first, bf_shape", [
    ((5, 4), True, (1, 5, 4)), ((5, 4), False, (1, 5, 4)),         # unbatched: batch_first is ignored
    ((2, 5, 4), True, (2, 5, 4)), ((5, 2, 4), False, (2, 5, 4)),
])
def test_round_trip_by_views(shape, batch_first, bf_shape):
    x = rng.standard_normal(shape)
    layout = BatchLayout.of(x, batch_first)
    assert layout.unbatched == (len(shape) == 2)
    y = layout.to_batch_first(x)
    assert y.shape == bf_shape and np.shares_memory(x, y)
    back = layout.from_batch_first(y)
    assert back.shape == x.shape and np.array_equal(back, x) and np.shares_memory(back, x)


def test_seq_first_swaps_batch_and_sequence():
    x = rng.standard_normal((5, 2, 4))                                       # (S, B, D)
    y = BatchLayout.of(x, False).to_batch_first(x)
    assert np.array_equal(y[1, 3], x[3, 1])


@pytest.mark.parametrize("shape, batch_first", [((5, 4), True), ((5, 2, 4), False), ((2, 5, 4), True)])
def test_an_array_passed_several_times_stays_one_array(shape, batch_first):
    x, other = rng.standard_normal(shape), rng.standard_normal(shape)
    layout = BatchLayout.of(x, batch_first)
    q, k, v = layout.to_batch_first(x, x, x)
    assert q is k and k is v                                                  # self-attention recognisable
    q, k, v = layout.to_batch_first(x, other, other)
    assert q is not k and k is v


def test_batch_axis_of_per_example_arrays():
    kpm = np.zeros(5, dtype=bool)
    unbatched, batched = BatchLayout(True, False), BatchLayout(False, False)
    assert unbatched.add_batch(kpm).shape == (1, 5) and unbatched.add_batch(None) is None
    assert batched.add_batch(kpm) is kpm                                      # (B, T) in every batched layout
    a, b = unbatched.add_batch(kpm, None)
    assert a.shape == (1, 5) and b is None
    assert unbatched.drop_batch(np.zeros((1, 3, 5))).shape == (3, 5) and unbatched.drop_batch(None) is None
    assert batched.drop_batch(kpm) is kpm


@pytest.mark.parametrize("layout, seen", [(BatchLayout(True, True), (5, 4)), (BatchLayout(False, True), (2, 5, 4)),
                                          (BatchLayout(False, False), (5, 2, 4))])
def test_gradient_checked_in_the_callers_layout(layout, seen):
    shape = (1, 5, 4) if layout.unbatched else (2, 5, 4)                      # the batch-first output
    dout = rng.standard_normal(seen)
    assert layout.grad_to_batch_first(dout, shape, np.float64).shape == shape
    with pytest.raises(ValueError, match=re.escape(f"dout must have the shape of the forward output {seen},")):
        layout.grad_to_batch_first(rng.standard_normal((3, 3)), shape, np.float64)
    with pytest.raises(TypeError, match="dout must have dtype float64"):
        layout.grad_to_batch_first(dout.astype(np.float32), shape, np.dtype(np.float64))


def _sources(*folders):
    """(relative path, source) of every module under the package ``folders``."""
    for folder in folders:
        base = os.path.join(ROOT, "numpy_transformer", folder)
        for name in sorted(os.listdir(base)):
            if name.endswith(".py"):
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    yield f"numpy_transformer/{folder}/{name}", f.read()


def test_no_module_converts_a_layout_by_hand():
    by_hand = [path for path, source in _sources("nn", "models")
               if "swapaxes(" in source and not path.endswith("_layout.py")]
    assert not by_hand, f"{by_hand} convert a layout by hand (np.swapaxes); use nn._layout.BatchLayout"


@pytest.mark.parametrize("path", ["numpy_transformer/nn/attention.py", "numpy_transformer/nn/decoder.py",
                                  "numpy_transformer/nn/transformer.py"])
def test_the_modules_convert_layouts_only_through_batch_layout(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        source = f.read()
    assert "swapaxes" not in source, f"{path} converts a layout by hand; use nn._layout.BatchLayout"
    assert "BatchLayout" in source


def test_sdpa_backward_reads_its_cache_by_name():
    tree = ast.parse(inspect.getsource(sdpa.scaled_dot_product_attention_backward))
    unpacks = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and isinstance(node.value, ast.Name) and node.value.id == "cache"
               and any(isinstance(t, ast.Tuple) for t in node.targets)]
    assert not unpacks, "scaled_dot_product_attention_backward unpacks its AttentionCache by position"


def _long_unpacks(source, limit=5):
    """``a, b, ... = cache`` (or ``= self._take()``) with more than ``limit`` names, in a backward."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or "backward" not in fn.name:
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assign):
                continue
            value = node.value
            whole = (isinstance(value, ast.Name) and value.id == "cache" or isinstance(value, ast.Call)
                     and isinstance(value.func, ast.Attribute) and value.func.attr == "_take")
            for target in node.targets:
                if whole and isinstance(target, ast.Tuple) and len(target.elts) > limit:
                    found.append(f"{fn.name} line {node.lineno}: {len(target.elts)} names")
    return found


def test_the_unpack_check_sees_a_long_unpack():
    source = "def op_backward(dout, cache):\n    a, b, c, d, e, f = cache\n    return a\n"
    assert _long_unpacks(source) == ["op_backward line 2: 6 names"]
    assert not _long_unpacks(source.replace("a, b, c, d, e, f = cache", "a, b = cache"))


CORE = list(_sources("functional", "nn"))


@pytest.mark.parametrize("path, source", CORE, ids=[path for path, _ in CORE])
def test_no_backward_unpacks_its_cache_into_more_than_five_names(path, source):
    assert not _long_unpacks(source), (f"{path}: {_long_unpacks(source)}: read the cache's fields by name "
                                       "(cache.q), not by position")


def test_the_scalar_cast_is_written_once():
    copies = [path for path, source in _sources("functional", "nn", "optim", "amp", "models")
              if ").type(" in source and "np.dtype(" in source and not path.endswith("functional/dtypes.py")]
    assert not copies, f"{copies} cast numbers to a dtype's scalar by hand; use functional.dtypes.as_scalar"
