"""The GPT model's configuration: :class:`GPTConfig` (nanoGPT's and Hugging Face's names, plus the modern
options: rotary/ALiBi/relative positions, RMSNorm, SwiGLU, grouped-query attention) and
:func:`llama_config`. :class:`numpy_transformer.GPT` reads it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..nn.block import FFNS, GATED_FFNS
from ..nn.block import NORMS as _BLOCK_NORMS
from ..utils.checks import as_float_dtype, check_number, check_positive_int, check_probability
from .score_bias import BIAS_POSITIONS

__all__ = ["GPTConfig", "llama_config", "POSITIONS", "GPT_FFNS", "GPT_ONLY_FFNS", "NORMS", "BIAS_POSITIONS"]

#: the position schemes GPT implements (:mod:`.gpt`); the vocabulary of ``positions=``
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "relative", "none")
#: the schemes that need TransformerBlocks: rotary q/k, or a bias on the attention scores
BLOCK_POSITIONS = ("rope", *BIAS_POSITIONS)
# the feed-forwards and norms are the block's (numpy_transformer.nn.block: FFNS, GATED_FFNS, NORMS)
#: the feed-forwards only GPT builds: "gelu_new", Hugging Face GPT-2's tanh GELU (nt.GELU(approximate="tanh"))
GPT_ONLY_FFNS = ("gelu_new",)
GPT_FFNS = (*FFNS, *GPT_ONLY_FFNS)
NORMS = tuple(_BLOCK_NORMS)


@dataclass
class GPTConfig:
    """The GPT model's configuration (a plain dataclass: ``dataclasses.asdict`` saves it, ``GPTConfig(**d)``
    restores it).

    Parameters
    ----------
    vocab_size : int
        V.
    block_size : int
        The longest sequence (nanoGPT's name; GPT-2's ``n_positions``): the positions table's size,
        and the most tokens a prompt plus its generated continuation may hold.
    n_layer, n_head, n_embd : int
        Blocks, heads and width D (D divisible by the heads).
    n_inner : int, optional
        The feed-forward width F (default ``4 * n_embd``, as GPT-2).
    dropout : float
        On the embedding sum, the attention probabilities, both residual branches and inside the
        feed-forward block (the encoder layer's four dropouts).
    bias : bool
        Biases in the attention and feed-forward projections and the LayerNorms (nanoGPT's ``bias``);
        the head never has one.
    ffn : str
        The feed-forward, one of :data:`numpy_transformer.nn.block.FFNS` or ``"gelu_new"``: an MLP with an
        activation ("gelu" (exact, as ``torch.nn.functional.gelu``), "relu", "silu"; "gelu_new", Hugging
        Face GPT-2's ``activation_function``: GELU's tanh approximation, ``nt.GELU(approximate="tanh")``),
        or a gated feed-forward of :data:`~numpy_transformer.nn.block.GATED_FFNS`,
        ``down_proj(act(gate_proj(x)) * up_proj(x))`` ("swiglu", Llama's, and the others defined in
        nn/feedforward.py).
    layer_norm_eps : float
    positions : {"learned", "sinusoidal", "rope", "alibi", "relative", "none"}
        A trained table ``wpe.weight`` (GPT-2), the fixed sine/cosine table, rotary embeddings of q
        and k in every block (GPT-NeoX, Llama), ALiBi's fixed linear bias on the scores (BLOOM), T5's
        learned bucketed relative bias (one table shared by the blocks), or nothing (the causal mask
        alone tells positions apart).
    norm : {"layernorm", "rmsnorm"}
        The blocks' and the final norm.
    num_kv_heads : int, optional
        Key/value heads of grouped-query attention (default ``n_head``; 1: multi-query).
    rope_base : float
        Rotary embeddings' base (10000, the paper's).
    relative_attention_num_buckets, relative_attention_max_distance : int
        T5's relative bias: buckets and the distance beyond which all share the last bucket.
    tie_word_embeddings : bool
        The head's weight is the token embedding's (one parameter used twice; its gradient is the sum
        of both uses).
    initializer_range : float
        The token (and learned position) embeddings are drawn from N(0, initializer_range**2), as
        GPT-2; the blocks keep torch's initialisation, an untied head torch's ``Linear`` one.
    dtype : {"float32", "float64"}

    With ``norm="layernorm"``, an MLP, ``num_kv_heads`` = ``n_head`` and learned, sinusoidal or no
    positions, the blocks are ``torch.nn.TransformerEncoderLayer``'s (``h.{i}.self_attn.in_proj_weight``
    ...); any other choice builds :class:`~numpy_transformer.nn.TransformerBlock` s (``h.{i}.norm1``,
    ``h.{i}.self_attn.q_proj`` ..., ``h.{i}.mlp.*``). ``llama_config(**kw)`` gives the Llama-style
    block: RMSNorm, rotary, SwiGLU, grouped-query attention, no biases.
    """

    vocab_size: int
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    n_inner: Optional[int] = None
    dropout: float = 0.0
    bias: bool = True
    ffn: str = "gelu"
    layer_norm_eps: float = 1e-5
    positions: str = "learned"
    norm: str = "layernorm"
    num_kv_heads: Optional[int] = None
    rope_base: float = 10000.0
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    tie_word_embeddings: bool = True
    initializer_range: float = 0.02
    dtype: str = "float32"

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Check every field (ValueError/TypeError naming it); normalise ``dtype`` to its name."""
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            check_positive_int(getattr(self, name), name)
        if self.n_inner is not None:
            check_positive_int(self.n_inner, "n_inner")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd={self.n_embd} and n_head={self.n_head}")
        check_probability(self.dropout)
        check_number(self.layer_norm_eps, "layer_norm_eps", low=0, low_open=True)
        check_number(self.initializer_range, "initializer_range", low=0)
        if self.ffn not in GPT_FFNS:
            raise ValueError(f"ffn must be one of {GPT_FFNS}, got {self.ffn!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.num_kv_heads is not None:
            check_positive_int(self.num_kv_heads, "num_kv_heads")
            if self.n_head % self.num_kv_heads:
                raise ValueError(f"n_head must be a multiple of num_kv_heads, got n_head={self.n_head} and "
                                 f"num_kv_heads={self.num_kv_heads}")
        if self.positions == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError(f"positions='rope' needs an even head dimension n_embd/n_head, got "
                             f"{self.n_embd}/{self.n_head} = {self.n_embd // self.n_head}")
        check_number(self.rope_base, "rope_base", low=1, low_open=True)
        check_positive_int(self.relative_attention_num_buckets, "relative_attention_num_buckets")
        check_positive_int(self.relative_attention_max_distance, "relative_attention_max_distance")
        for name in ("bias", "tie_word_embeddings"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        self.dtype = as_float_dtype(self.dtype).name

    @property
    def modern(self):
        """True when the blocks are :class:`~numpy_transformer.nn.TransformerBlock` s (an option torch's
        encoder layer does not have); False: ``TransformerEncoderLayer``."""
        return (self.norm != "layernorm" or self.ffn in GATED_FFNS or self.positions in BLOCK_POSITIONS
                or self.num_kv_heads not in (None, self.n_head))

    @property
    def ffn_dim(self):
        """F: ``n_inner``, or ``4 * n_embd``."""
        return 4 * self.n_embd if self.n_inner is None else self.n_inner

    def to_dict(self):
        return dataclasses.asdict(self)




def llama_config(vocab_size, **kwargs):
    """A :class:`GPTConfig` with Llama's block: RMSNorm, rotary positions, SwiGLU, grouped-query attention
    (``num_kv_heads`` default ``max(1, n_head // 2)``), no biases, an untied head; ``kwargs`` override."""
    cfg = dict(vocab_size=vocab_size, positions="rope", norm="rmsnorm", ffn="swiglu", bias=False,
               tie_word_embeddings=False)
    cfg.update(kwargs)
    cfg.setdefault("num_kv_heads", max(1, cfg.get("n_head", GPTConfig.n_head) // 2))
    return GPTConfig(**cfg)
