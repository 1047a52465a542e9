"""numpy-transformer: a Transformer encoder in pure NumPy, every layer with a hand-written backward.

The modules mirror ``torch.nn`` (names, arguments, defaults, masks, ``state_dict`` keys); the
functional core (:mod:`numpy_transformer.functional`) holds each op as a forward/backward pair.
"""

from . import functional
from ._trace import trace
from .nn import (GELU, Dropout, Embedding, LayerNorm, Linear, Module, ModuleList, MultiheadAttention,
                 Parameter, PositionalEncoding, ReLU, RMSNorm, TokenEmbedding, TransformerEncoder,
                 TransformerEncoderLayer, dropout_masks, sinusoidal_table)
from .nn import Transformer, TransformerDecoder, TransformerDecoderLayer
from .nn import LearnedPositionalEmbedding, SiLU, SwiGLU
from .gradcheck import GradcheckResult, gradcheck, gradcheck_module
from .oracle import check_against_torch, check_against_torch_module

from . import data, optim
from .loss import CrossEntropyLoss
from .model import TransformerModel
from .gpt import GPT, GPTConfig, llama_config
from .nn import KVCache
from .nn import FeedForward, GroupedQueryAttention, TransformerBlock
from .nn import RotaryEmbedding
from .nn import RelativePositionBias
from . import generation
from .seq2seq_model import Seq2SeqModel
from . import tasks_seq2seq
from .bleu import corpus_bleu
from .optim import clip_grad_norm_
from . import amp

__version__ = "0.1.0"

__all__ = [
    "functional", "trace", "GELU", "Dropout", "Embedding", "LayerNorm", "Linear", "Module", "ModuleList",
    "MultiheadAttention", "Parameter", "PositionalEncoding", "ReLU", "RMSNorm", "TokenEmbedding", "TransformerEncoder",
    "TransformerEncoderLayer", "dropout_masks", "sinusoidal_table",
]
__all__ += ["data", "optim", "CrossEntropyLoss", "TransformerModel", "clip_grad_norm_"]
__all__ += ["gradcheck", "gradcheck_module", "GradcheckResult"]
__all__ += ["check_against_torch", "check_against_torch_module"]
__all__ += ["Transformer", "TransformerDecoder", "TransformerDecoderLayer"]
__all__ += ["GPT", "GPTConfig", "llama_config", "KVCache", "generation"]
__all__ += ["Seq2SeqModel", "tasks_seq2seq", "corpus_bleu"]
__all__ += ["GroupedQueryAttention", "TransformerBlock", "FeedForward"]
__all__ += ["RotaryEmbedding"]
__all__ += ["RelativePositionBias"]
__all__ += ["SiLU", "SwiGLU", "LearnedPositionalEmbedding"]
__all__ += ["amp"]
