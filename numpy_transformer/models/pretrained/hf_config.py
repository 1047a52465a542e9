"""Hugging Face's ``config.json`` <-> :class:`~numpy_transformer.models.gpt_config.GPTConfig`, for
``model_type`` ``"gpt2"`` and ``"llama"``.

Each HF key that changes the maths maps to one GPTConfig field, or must hold the one value our blocks
compute (``scale_attn_weights: true``, ``hidden_act: "silu"``, ...); a value that does not map exactly
raises :class:`PretrainedFolderError` naming the key. Keys that change nothing computed (token ids,
``use_cache``, ``architectures``, GPT-2's ``summary_*`` heads, ...) are not read.

Dropout is not carried over: ``transformers``' ``from_pretrained`` returns its model in eval mode, and
GPT-2's three ``*_pdrop`` do not sit where ``GPTConfig.dropout``'s four dropouts do (ours also drops
inside the feed-forward), so a loaded model has ``dropout=0.0``. :func:`config_to_hf` writes
``GPTConfig.dropout`` into those keys, the nearest HF meaning.

GPT-2 (``GPT2LMHeadModel``)::

    n_positions -> block_size      n_embd, n_layer, n_head, n_inner, vocab_size (same names)
    layer_norm_epsilon -> layer_norm_eps    activation_function "gelu_new" -> ffn="gelu_new" (tanh GELU)
    learned positions, LayerNorm with biases, tied head (tie_word_embeddings, default true)

Llama (``LlamaForCausalLM``)::

    hidden_size -> n_embd    intermediate_size -> n_inner    num_hidden_layers -> n_layer
    num_attention_heads -> n_head    num_key_value_heads -> num_kv_heads (grouped-query attention)
    max_position_embeddings -> block_size    rms_norm_eps -> layer_norm_eps
    rope_theta (or rope_parameters["rope_theta"]) -> rope_base    attention_bias = mlp_bias -> bias
    rotary (rotate_half), RMSNorm, SwiGLU; tie_word_embeddings default false

(Llama's ``intermediate_size`` is a number: a config with ``n_inner=None`` comes back with
``n_inner = 4 * n_embd``, the same model.)
"""

from __future__ import annotations

from typing import Any

from ..gpt_config import GPTConfig

__all__ = ["PretrainedFolderError", "MODEL_TYPES", "config_from_hf", "config_to_hf", "hf_model_type"]

MODEL_TYPES = ("gpt2", "llama")

# HF's activation_function names for GPT-2 -> GPTConfig.ffn ("gelu_new" and "gelu_pytorch_tanh" are both
# the tanh approximation; "gelu" is the exact, erf one)
GPT2_ACTIVATIONS = {"gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "gelu": "gelu", "relu": "relu",
                    "silu": "silu", "swish": "silu"}
_FFN_TO_GPT2 = {"gelu_new": "gelu_new", "gelu": "gelu", "relu": "relu", "silu": "silu"}


class PretrainedFolderError(ValueError):
    """A Hugging Face folder (or a model to save as one) that cannot be read or written exactly; the
    message names the file, key or field and what was found."""


def _get(hf: dict, key: str, default: Any = KeyError) -> Any:
    if key in hf:
        return hf[key]
    if default is KeyError:
        raise PretrainedFolderError(f"config.json has no {key!r} (model_type {hf.get('model_type')!r} needs it)")
    return default


def _require(hf: dict, key: str, wanted: Any, default: Any, why: str) -> None:
    """``hf[key]`` (or ``default`` when absent) must equal ``wanted``."""
    value = hf.get(key, default)
    if value != wanted:
        raise PretrainedFolderError(f"config.json: {key}={value!r} is not supported ({why}; expected {wanted!r})")


def _gpt2_fields(hf: dict) -> dict:
    act = _get(hf, "activation_function", "gelu_new")
    if act not in GPT2_ACTIVATIONS:
        raise PretrainedFolderError(f"config.json: activation_function={act!r} is not supported (expected one of "
                                    f"{tuple(GPT2_ACTIVATIONS)})")
    _require(hf, "scale_attn_weights", True, True, "the scores are always divided by sqrt(head_dim)")
    _require(hf, "scale_attn_by_inverse_layer_idx", False, False, "no per-layer score scaling")
    _require(hf, "add_cross_attention", False, False, "a decoder-only model has no cross-attention")
    return dict(vocab_size=_get(hf, "vocab_size"), block_size=_get(hf, "n_positions"), n_layer=_get(hf, "n_layer"),
                n_head=_get(hf, "n_head"), n_embd=_get(hf, "n_embd"), n_inner=_get(hf, "n_inner", None),
                ffn=GPT2_ACTIVATIONS[act], layer_norm_eps=_get(hf, "layer_norm_epsilon", 1e-5), positions="learned",
                norm="layernorm", bias=True, tie_word_embeddings=_get(hf, "tie_word_embeddings", True),
                initializer_range=_get(hf, "initializer_range", 0.02))


def _rope_theta(hf: dict) -> float:
    """``rope_theta`` from transformers 4's top-level key or 5's ``rope_parameters``; only the plain
    (``"default"``) rotary embedding maps (no scaling: linear, dynamic, yarn, llama3 ... are refused)."""
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    for key, table in (("rope_parameters", params), ("rope_scaling", scaling)):
        kind = table.get("rope_type", table.get("type", "default"))
        if kind != "default":
            raise PretrainedFolderError(f"config.json: {key}'s rope_type={kind!r} is not supported (only the plain "
                                        "rotary embedding, 'default', maps to positions='rope')")
    if "rope_theta" in params:
        return params["rope_theta"]
    return _get(hf, "rope_theta", 10000.0)


def _llama_fields(hf: dict) -> dict:
    d, heads = _get(hf, "hidden_size"), _get(hf, "num_attention_heads")
    _require(hf, "hidden_act", "silu", "silu", "Llama's SwiGLU gates with silu")
    attention_bias, mlp_bias = hf.get("attention_bias", False), hf.get("mlp_bias", False)
    for key, value in (("attention_bias", attention_bias), ("mlp_bias", mlp_bias)):
        if not isinstance(value, bool):
            raise PretrainedFolderError(f"config.json: {key} must be true or false, got {value!r}")
    if attention_bias != mlp_bias:
        raise PretrainedFolderError(f"config.json: attention_bias={attention_bias!r} with mlp_bias={mlp_bias!r} is "
                                    "not supported (GPTConfig.bias puts biases in both or in neither)")
    if isinstance(d, int) and isinstance(heads, int) and heads > 0 and hf.get("head_dim") not in (None, d // heads):
        raise PretrainedFolderError(f"config.json: head_dim={hf['head_dim']!r} is not supported (expected "
                                    f"hidden_size / num_attention_heads = {d // heads})")
    return dict(vocab_size=_get(hf, "vocab_size"), block_size=_get(hf, "max_position_embeddings"),
                n_layer=_get(hf, "num_hidden_layers"), n_head=heads, n_embd=d, n_inner=_get(hf, "intermediate_size"),
                num_kv_heads=_get(hf, "num_key_value_heads", None) or heads, ffn="swiglu", norm="rmsnorm",
                positions="rope", rope_base=float(_rope_theta(hf)), layer_norm_eps=_get(hf, "rms_norm_eps", 1e-6),
                bias=bool(attention_bias), tie_word_embeddings=_get(hf, "tie_word_embeddings", False),
                initializer_range=_get(hf, "initializer_range", 0.02))


def config_from_hf(hf: dict, dtype: str = "float32") -> GPTConfig:
    """A ``config.json`` (parsed) -> the GPTConfig that computes the same model, with ``dropout=0.0``.

    Parameters
    ----------
    hf : dict
        The folder's ``config.json``.
    dtype : {"float32", "float64"}
        The model's dtype (the file's tensors are cast to it).

    Raises
    ------
    PretrainedFolderError
        ``model_type`` other than ``"gpt2"``/``"llama"`` (naming what was found), a key that does not
        map exactly, or a field GPTConfig refuses (its message, prefixed by the folder's key names).
    """
    if not isinstance(hf, dict):
        raise PretrainedFolderError(f"config.json must hold a JSON object, got {type(hf).__name__}")
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise PretrainedFolderError(f"config.json: model_type={kind!r} is not supported (expected one of "
                                    f"{MODEL_TYPES})")
    fields = _gpt2_fields(hf) if kind == "gpt2" else _llama_fields(hf)
    try:
        return GPTConfig(**fields, dropout=0.0, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise PretrainedFolderError(f"config.json ({kind}) gives an invalid GPTConfig: {exc}") from None


def hf_model_type(cfg: GPTConfig) -> str:
    """``"gpt2"`` or ``"llama"``: the Hugging Face architecture that computes exactly the model ``cfg``
    builds; PretrainedFolderError naming the fields when neither does."""
    gpt2 = dict(positions="learned", norm="layernorm", bias=True)
    if all(getattr(cfg, k) == v for k, v in gpt2.items()) and cfg.ffn in _FFN_TO_GPT2 \
            and cfg.num_kv_heads in (None, cfg.n_head):
        return "gpt2"
    if cfg.positions == "rope" and cfg.norm == "rmsnorm" and cfg.ffn == "swiglu":
        return "llama"
    raise PretrainedFolderError(
        "this GPT cannot be saved as a Hugging Face folder: GPT-2 needs positions='learned', norm='layernorm', "
        f"bias=True, ffn in {tuple(_FFN_TO_GPT2)} and no grouped-query attention; Llama needs "
        f"positions='rope', norm='rmsnorm', ffn='swiglu'; this one has positions={cfg.positions!r}, "
        f"norm={cfg.norm!r}, ffn={cfg.ffn!r}, bias={cfg.bias!r}, num_kv_heads={cfg.num_kv_heads!r}")


def config_to_hf(cfg: GPTConfig) -> dict:
    """The ``config.json`` of ``cfg`` as GPT-2 or Llama (:func:`hf_model_type`), which
    ``transformers.AutoConfig`` reads back to the same model."""
    kind = hf_model_type(cfg)
    common = dict(model_type=kind, vocab_size=cfg.vocab_size, tie_word_embeddings=bool(cfg.tie_word_embeddings),
                  initializer_range=cfg.initializer_range, dtype=cfg.dtype, bos_token_id=None, eos_token_id=None,
                  pad_token_id=None)
    if kind == "gpt2":
        return dict(common, architectures=["GPT2LMHeadModel"], n_positions=cfg.block_size, n_embd=cfg.n_embd,
                    n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.n_inner,
                    activation_function=_FFN_TO_GPT2[cfg.ffn], layer_norm_epsilon=cfg.layer_norm_eps,
                    resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout, scale_attn_weights=True,
                    scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False, add_cross_attention=False)
    return dict(common, architectures=["LlamaForCausalLM"], hidden_size=cfg.n_embd, intermediate_size=cfg.ffn_dim,
                num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
                num_key_value_heads=cfg.num_kv_heads or cfg.n_head, head_dim=cfg.n_embd // cfg.n_head,
                max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.layer_norm_eps, hidden_act="silu",
                rope_theta=cfg.rope_base, rope_parameters=dict(rope_type="default", rope_theta=cfg.rope_base),
                attention_bias=bool(cfg.bias), mlp_bias=bool(cfg.bias), attention_dropout=cfg.dropout,
                pretraining_tp=1)
