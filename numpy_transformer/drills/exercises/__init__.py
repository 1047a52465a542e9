"""The drills: what each exercise asks, how its cases are drawn, how it is run, and its classic mistakes.

One module per exercise (``softmax.py``, ``layer_norm.py``, ``rms_norm.py`` ... ``encoder_layer.py``),
each defining an :class:`Exercise` constant; this package holds the registry (:data:`EXERCISES`,
:data:`ALIASES`, :func:`get`, :func:`draw_case`) and re-exports the data types and shared helpers of
``_types.py``.

Every exercise has

* ``functions`` — the names the user's file must define (the skeleton's exact signatures);
* ``draw(rng, i)`` — case ``i`` (the first few are fixed edge cases such as B=1, S=1, H=1; the rest are
  drawn from a seeded NumPy generator, so a seed always gives the same cases);
* ``run(rec, inputs)`` — calls the functions through a :class:`numpy_transformer.drills._harness.Recorder`
  and records each returned array under a name (``y``, ``dx``, ``dW`` ...);
* ``reference()`` — a namespace built on the verified library (:mod:`numpy_transformer.functional`, or
  its modules such as ``nn.TransformerEncoderLayer``; itself proven against PyTorch), which the grader
  compares with;
* ``mistakes`` — classic errors, each a configuration of the matching ``variants.*_impl``.

Adding an exercise ``NAME``
---------------------------

1. ``skeletons/NAME.py`` — what ``drill start`` writes: a module docstring with "Conventions" and
   "Hints:", the exact signatures, a docstring per function with the shapes and a "Returns" section,
   and bodies that are only ``raise NotImplementedError`` (a test checks all of this);
2. ``solutions/NAME.py`` — the reference solution ``drill solution`` prints: self-contained NumPy, the
   same signatures as the skeleton (it must pass ``drill check``);
3. ``variants.py`` (or, re-exported there, ``variants_attention.py``, ``variants_training.py``,
   ``variants_decoder.py``) — ``NAME_impl(**knobs)``: an implementation written independently of
   ``functional``, correct with the default knobs, each knob value reproducing one classic mistake;
4. ``exercises/NAME.py`` — ``_draw_NAME(rng, i)`` (fixed edge cases first), ``_run_NAME(rec, c)``,
   ``_ref_NAME()`` (on the verified library), and the ``Exercise`` constant with its ``Mistake`` list
   (copy the closest existing module; import what it needs from ``._types``). Optional: ``Case.options``
   for the report's "fails only ..." summary, ``Exercise.topic`` (or a line in :data:`TOPICS`), and
   ``Exercise.grad_check`` when the gradients are not named ``dX`` / ``grads[K]``; an attention drill
   whose variant takes the ``mask_mode``/``causal_mode`` knobs reuses ``_attention_mistakes``;
5. the registry below — one line importing that constant, at the place it should take in
   ``drill list``, and its name in the ``EXERCISES`` tuple;
6. ``docs/drills.md`` — a row in the exercises table and a table of its mistakes (a test checks that the
   page names every exercise, function and mistake); in ``tests/test_drills.py`` an entry in
   ``ADAPTERS`` (the library driven through the skeleton's signatures) and in ``MISTAKES`` per mistake;
   and a case in ``reference_torch/drill_oracle.py`` so that torch re-checks the reference.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ._types import MISSING, Case, Exercise, Mistake, _desc, _Missing, _shape
from ._upstream import replace_upstream

# --------------------------------------------------------------------------------------------------
# registry: one import per exercise module, in `drill list` order
# --------------------------------------------------------------------------------------------------

from .softmax import SOFTMAX
from .layer_norm import LAYER_NORM
from .rms_norm import RMS_NORM
from .gelu import GELU
from .silu import SILU
from .linear import LINEAR
from .swiglu import SWIGLU
from .dropout import DROPOUT
from .embedding import EMBEDDING
from .relative_position_bias import RELATIVE_POSITION_BIAS
from .alibi import ALIBI
from .learned_positions import LEARNED_POSITIONS
from .cross_entropy import CROSS_ENTROPY
from .cross_entropy_options import CROSS_ENTROPY_OPTIONS
from .adamw_step import ADAMW_STEP
from .positional_encoding import POSITIONAL
from .rope import ROPE
from .scaled_dot_product_attention import ATTENTION
from .grouped_query_attention import GQA
from .causal_attention_kv_cache import KV_CACHE
from .multi_head_attention import MHA
from .cross_attention import CROSS_ATTENTION
from .flash_attention_backward import FLASH_BACKWARD
from .encoder_layer import ENCODER, PARAM_KEYS
from .decoder_layer import DECODER

EXERCISES = {e.name: e for e in (SOFTMAX, LAYER_NORM, RMS_NORM, GELU, SILU, LINEAR, SWIGLU, DROPOUT,
                                 EMBEDDING, RELATIVE_POSITION_BIAS, ALIBI, CROSS_ENTROPY, CROSS_ENTROPY_OPTIONS,
                                 ADAMW_STEP, POSITIONAL, LEARNED_POSITIONS, ROPE, ATTENTION, GQA, KV_CACHE, MHA,
                                 CROSS_ATTENTION, FLASH_BACKWARD, ENCODER, DECODER)}

ALIASES = {"attention": "scaled_dot_product_attention", "sdpa": "scaled_dot_product_attention",
           "mha": "multi_head_attention", "layernorm": "layer_norm", "ln": "layer_norm",
           "encoder": "encoder_layer", "pe": "positional_encoding", "ce": "cross_entropy",
           "cross-entropy": "cross_entropy", "layer-norm": "layer_norm", "rmsnorm": "rms_norm",
           "rotary": "rope", "t5_bias": "relative_position_bias", "relative_bias": "relative_position_bias",
           "gqa": "grouped_query_attention", "mqa": "grouped_query_attention", "swish": "silu",
           "label_smoothing": "cross_entropy_options", "ignore_index": "cross_entropy_options",
           "adamw": "adamw_step", "adam": "adamw_step",
           "kv_cache": "causal_attention_kv_cache", "kv": "causal_attention_kv_cache",
           "xattn": "cross_attention", "cross": "cross_attention",
           "decoder": "decoder_layer",
           "flash": "flash_attention_backward", "flash_attention": "flash_attention_backward"}

__all__ = ["TOPICS", "topic_of", "Mistake", "Case", "Exercise", "MISSING", "EXERCISES", "ALIASES", "get", "draw_case", "PARAM_KEYS",
           "SOFTMAX", "LAYER_NORM", "RMS_NORM", "GELU", "LINEAR", "EMBEDDING", "CROSS_ENTROPY", "POSITIONAL",
           "ROPE", "ATTENTION", "GQA", "MHA", "ENCODER", "RELATIVE_POSITION_BIAS", "SILU", "SWIGLU", "DROPOUT",
           "CROSS_ENTROPY_OPTIONS", "ADAMW_STEP", "KV_CACHE", "CROSS_ATTENTION", "DECODER",
           "FLASH_BACKWARD", "ALIBI", "LEARNED_POSITIONS"]


#: the interview topic of each exercise for `drill list` (an exercise may set ``Exercise.topic`` instead)
TOPICS = {"softmax": "numerics", "layer_norm": "normalisation", "rms_norm": "normalisation",
          "gelu": "activations", "linear": "backprop basics", "embedding": "backprop basics",
          "cross_entropy": "losses", "positional_encoding": "positions", "scaled_dot_product_attention": "attention",
          "multi_head_attention": "attention", "encoder_layer": "architecture", "silu": "activations",
          "swiglu": "activations", "rope": "positions", "grouped_query_attention": "attention",
          "relative_position_bias": "positions"}


def topic_of(ex):
    """The interview topic `drill list` shows for ``ex``."""
    return ex.topic or TOPICS.get(ex.name, "-")


def get(name) -> Optional[Exercise]:
    """The exercise called ``name`` (or one of its aliases), else None."""
    name = (name or "").strip().lower().replace("-", "_")
    name = ALIASES.get(name, name)
    return EXERCISES.get(name)


def draw_case(exercise, seed, i):
    """Case ``i`` of ``exercise`` for ``seed``: deterministic, independent of the other cases; its upstream
    gradients (``dy``, ``dout``, ``dbias``) come from a stream of their own (:mod:`._upstream`)."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(i), len(exercise.name)])
    # the upstream gradient from a stream of its own, never parallel to an input (see _upstream.py)
    return replace_upstream(exercise.draw(rng, i), seed, i, exercise.name)
