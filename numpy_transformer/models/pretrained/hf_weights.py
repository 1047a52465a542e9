"""The tensor names and layouts of Hugging Face's GPT-2 and Llama <-> :class:`~numpy_transformer.GPT`'s
``state_dict``.

GPT-2's blocks are our ``TransformerEncoderLayer`` s, whose keys are torch's. GPT-2 stores its
projections as ``Conv1D`` weights, shape (in, out) (``y = x @ W + b``), where a ``Linear`` holds
(out, in): every such weight is transposed. ``c_attn`` is q, k and v side by side, (D, 3D); its
transpose is exactly ``in_proj_weight`` (3D, D), q's rows, then k's, then v's, so the split is the one
torch's layer makes itself::

    transformer.wte.weight            wte.weight               (V, D)
    transformer.wpe.weight            wpe.weight               (block_size, D)
    transformer.h.{i}.ln_1.*          h.{i}.norm1.*
    transformer.h.{i}.attn.c_attn.*   h.{i}.self_attn.in_proj_{weight,bias}     weight transposed
    transformer.h.{i}.attn.c_proj.*   h.{i}.self_attn.out_proj.*                weight transposed
    transformer.h.{i}.ln_2.*          h.{i}.norm2.*
    transformer.h.{i}.mlp.c_fc.*      h.{i}.linear1.*                           weight transposed
    transformer.h.{i}.mlp.c_proj.*    h.{i}.linear2.*                           weight transposed
    transformer.ln_f.*                ln_f.*

Llama's are ``Linear`` s already, names as ours but for the containers::

    model.embed_tokens.weight                 wte.weight
    model.layers.{i}.input_layernorm.weight   h.{i}.norm1.weight
    model.layers.{i}.self_attn.{q,k,v,o}_proj.*   h.{i}.self_attn.{q,k,v,o}_proj.*
    model.layers.{i}.post_attention_layernorm.weight  h.{i}.norm2.weight
    model.layers.{i}.mlp.{gate,up,down}_proj.*    h.{i}.mlp.{gate,up,down}_proj.*
    model.norm.weight                         ln_f.weight

and ``lm_head.weight`` (V, D) for both when the head is untied. A tied head is stored once, as the
token embedding (``transformers`` drops the shared tensor when saving); a file that also lists
``lm_head.weight`` must hold the embedding's values there. Files written by older ``transformers``
may lack the ``transformer.`` / ``model.`` prefix (the Hub's own GPT-2 does), and may hold buffers that
are not weights: GPT-2's causal-mask ``attn.bias`` / ``attn.masked_bias`` and Llama's rotary
``rotary_emb.inv_freq``; both are accepted and those buffers skipped (ours are computed).
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, Tuple

import numpy as np

from ..gpt_config import GPTConfig
from .hf_config import PretrainedFolderError, hf_model_type

__all__ = ["key_map", "to_hf", "from_hf"]

PREFIX = {"gpt2": "transformer.", "llama": "model."}
# buffers older files hold that are not parameters (ours are computed, not stored)
_BUFFERS = re.compile(r"(^|\.)(attn\.bias|attn\.masked_bias|rotary_emb\.inv_freq)$")

_GPT2_BLOCK = (("ln_1.weight", "norm1.weight", False), ("ln_1.bias", "norm1.bias", False),
               ("attn.c_attn.weight", "self_attn.in_proj_weight", True),
               ("attn.c_attn.bias", "self_attn.in_proj_bias", False),
               ("attn.c_proj.weight", "self_attn.out_proj.weight", True),
               ("attn.c_proj.bias", "self_attn.out_proj.bias", False),
               ("ln_2.weight", "norm2.weight", False), ("ln_2.bias", "norm2.bias", False),
               ("mlp.c_fc.weight", "linear1.weight", True), ("mlp.c_fc.bias", "linear1.bias", False),
               ("mlp.c_proj.weight", "linear2.weight", True), ("mlp.c_proj.bias", "linear2.bias", False))
_LLAMA_BLOCK = (("input_layernorm.weight", "norm1.weight"), ("post_attention_layernorm.weight", "norm2.weight"))
_LLAMA_LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                  "mlp.up_proj", "mlp.down_proj")


def key_map(cfg: GPTConfig) -> Iterator[Tuple[str, str, bool]]:
    """``(hf_name, our_name, transposed)`` for every tensor the HF file of ``cfg`` holds (a tied head
    once, as the embedding)."""
    kind = hf_model_type(cfg)
    if kind == "gpt2":
        yield "transformer.wte.weight", "wte.weight", False
        yield "transformer.wpe.weight", "wpe.weight", False
        for i in range(cfg.n_layer):
            for hf, ours, t in _GPT2_BLOCK:
                yield f"transformer.h.{i}.{hf}", f"h.{i}.{ours}", t
        yield "transformer.ln_f.weight", "ln_f.weight", False
        yield "transformer.ln_f.bias", "ln_f.bias", False
    else:
        yield "model.embed_tokens.weight", "wte.weight", False
        for i in range(cfg.n_layer):
            for hf, ours in _LLAMA_BLOCK:
                yield f"model.layers.{i}.{hf}", f"h.{i}.{ours}", False
            for name in _LLAMA_LINEARS:
                for p in ("weight", "bias") if cfg.bias else ("weight",):
                    yield f"model.layers.{i}.{name}.{p}", f"h.{i}.{name}.{p}", False
        yield "model.norm.weight", "ln_f.weight", False
    if not cfg.tie_word_embeddings:
        yield "lm_head.weight", "lm_head.weight", False


def to_hf(cfg: GPTConfig, ours: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Our arrays by name (a model's parameters, or their gradients) -> HF's names and layouts
    (contiguous copies: what safetensors writes)."""
    return {hf: np.ascontiguousarray(ours[name].T if t else ours[name]) for hf, name, t in key_map(cfg)}


def _normalise_names(cfg: GPTConfig, tensors: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Buffers dropped; the base-model prefix added when the file has none (older GPT-2 files)."""
    prefix = PREFIX[hf_model_type(cfg)]
    tensors = {k: v for k, v in tensors.items() if not _BUFFERS.search(k)}
    if not any(k.startswith(prefix) for k in tensors):
        tensors = {(k if k.startswith("lm_head.") else prefix + k): v for k, v in tensors.items()}
    return tensors


def from_hf(cfg: GPTConfig, tensors: Dict[str, np.ndarray], shapes: Dict[str, tuple]) -> Dict[str, np.ndarray]:
    """HF tensors by name -> our arrays by name, each checked against ``shapes`` (ours, by our name).

    Raises
    ------
    PretrainedFolderError
        Missing or unexpected tensors (listed), a shape that differs (the tensor, what it has, what was
        expected), a tied head stored with values other than the embedding's, or a tensor that is not
        floating point.
    """
    tensors = _normalise_names(cfg, tensors)
    if cfg.tie_word_embeddings and "lm_head.weight" in tensors:
        head = tensors.pop("lm_head.weight")
        emb = tensors.get(next(iter(key_map(cfg)))[0])
        if emb is not None and (head.shape != emb.shape or not np.array_equal(head, emb)):
            raise PretrainedFolderError("the weights hold an lm_head.weight that differs from the token embedding, "
                                        "but config.json says tie_word_embeddings=true")
    wanted = list(key_map(cfg))
    missing = [hf for hf, _, _ in wanted if hf not in tensors]
    extra = sorted(set(tensors) - {hf for hf, _, _ in wanted})
    if missing or extra:
        parts = [f"{len(missing)} missing ({_listing(missing)})"] if missing else []
        parts += [f"{len(extra)} unexpected ({_listing(extra)})"] if extra else []
        raise PretrainedFolderError(f"the weights do not match config.json ({hf_model_type(cfg)}, n_layer="
                                    f"{cfg.n_layer}, bias={cfg.bias}, tie_word_embeddings={cfg.tie_word_embeddings}): "
                                    + "; ".join(parts))
    out = {}
    for hf, name, t in wanted:
        a = tensors[hf]
        if a.dtype.kind != "f":
            raise PretrainedFolderError(f"tensor {hf} has dtype {a.dtype}, expected a floating-point tensor")
        expected = shapes[name][::-1] if t else shapes[name]
        if tuple(a.shape) != tuple(expected):
            raise PretrainedFolderError(f"tensor {hf} has shape {tuple(a.shape)}, expected {tuple(expected)} "
                                        "(from config.json)")
        out[name] = a.T if t else a
    return out


def _listing(names, most=4):
    shown = ", ".join(names[:most])
    return shown + (f", ... {len(names) - most} more" if len(names) > most else "")
