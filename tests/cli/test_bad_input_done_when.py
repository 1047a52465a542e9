"""Bad input, the decoder and generation errors of the issue's "Done when" list: each entry point that takes
the input, and what its refusal says.
"""

from __future__ import annotations

import numpy as np
import pytest

import numpy_transformer as nt
from tests.cli.bad_input_helpers import (
    DT,
    FF,
    MAXLEN,
    B,
    D,
    H,
    S,
    T,
    V,
    expect,
)


def _decoders():
    layer = nt.TransformerDecoderLayer(D, H, FF, dropout=0.0, dtype=DT, seed=0)
    return {"TransformerDecoderLayer": layer, "TransformerDecoder": nt.TransformerDecoder(layer, 2),
            "Transformer": nt.Transformer(D, H, 1, 1, FF, dropout=0.0, dtype=DT, seed=0)}


def _decoder_call(name, tgt=None, memory=None, **kw):
    m = _decoders()[name]
    tgt = np.zeros((B, S, D)) if tgt is None else tgt
    memory = np.zeros((B, T, D)) if memory is None else memory
    return lambda: m(memory, tgt, **kw) if name == "Transformer" else m(tgt, memory, **kw)


def _seq2seq():
    return nt.Seq2SeqModel(V, V, d_model=D, nhead=H, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=FF,
                           dropout=0.0, max_len=MAXLEN, dtype=DT, seed=0)


def _gpt():
    return nt.GPT(vocab_size=V, block_size=MAXLEN, n_layer=1, n_head=H, n_embd=D, dtype="float64", seed=0)


_ONES = np.ones((B, 3), dtype=np.int64)
DONE_WHEN = {      # the "Done when" list: each entry point that takes the input, and what it says
    # memory of the wrong width
    **{f"{n} memory width": (_decoder_call(n, memory=np.zeros((B, T, D + 1))), ValueError,
                             ["must have last dimension 6", f"(D = d_model = {D})", f"got shape {(B, T, D + 1)}"])
       for n in ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")},
    "Seq2SeqModel.decode memory width": (lambda: _seq2seq().decode(_ONES, np.zeros((B, T, D - 1))), ValueError,
                                         ["memory must have last dimension 6", f"got shape {(B, T, D - 1)}"]),
    # a mask for the wrong length
    **{f"{n} {k}": (_decoder_call(n, **{k: np.zeros(shape, bool)}), ValueError, [k, want, f"got {shape}"])
       for n in ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")
       for k, shape, want in [("tgt_mask", (T, T), f"{(S, S)}"), ("memory_mask", (S, S), f"{(S, T)}"),
                              ("tgt_key_padding_mask", (B, T), f"{(B, S)}"),
                              ("memory_key_padding_mask", (B, S), f"{(B, T)}")]},
    "Seq2SeqModel.greedy_decode src_key_padding_mask": (
        lambda: _seq2seq().greedy_decode(_ONES, 4, 1, 2, src_key_padding_mask=np.zeros((B, 2), bool)), ValueError,
        ["src_key_padding_mask must have shape (2, 3)", "got (2, 2)"]),
    "GPT.generate attention_mask": (lambda: _gpt().generate(_ONES, 2, attention_mask=np.ones((B, 4), int)),
                                    ValueError, ["attention_mask must have shape (2, 3)", "got shape (2, 4)"]),
    # ids past max_len / block_size during generation
    "Seq2SeqModel.greedy_decode max_len": (lambda: _seq2seq().greedy_decode(_ONES, MAXLEN + 1, 1, 2), ValueError,
                                           [f"max_len must be <= the model's max_len={MAXLEN}", f"got {MAXLEN + 1}"]),
    "Seq2SeqModel.greedy_decode src length": (lambda: _seq2seq().greedy_decode(np.ones((B, MAXLEN + 1), int), 3, 1, 2),
                                              ValueError, [f"src length {MAXLEN + 1} exceeds max_len={MAXLEN}"]),
    # (generate past block_size crops, as nanoGPT: tests/models/test_generation_crop.py)
    "GPT forward past block_size": (lambda: _gpt()(np.ones((B, MAXLEN + 1), int)), ValueError,
                                    [f"ids: {MAXLEN + 1} positions exceed block_size={MAXLEN}"]),
    # an empty prompt
    "GPT.generate empty prompt": (lambda: _gpt().generate(np.zeros((B, 0), int), 2), ValueError,
                                  ["ids is an empty prompt (shape (2, 0))", "at least one token per row"]),
    "GPT.generate no rows": (lambda: _gpt().generate(np.zeros((0, 3), int), 2), ValueError,
                             ["ids holds no prompt (shape (0, 3))", "B >= 1"]),
    "GPT.generate all-padding row": (lambda: _gpt().generate(_ONES, 2, attention_mask=[[0, 0, 0], [1, 1, 1]]),
                                     ValueError, ["attention_mask row 0 is all 0: an empty prompt"]),
    "Seq2SeqModel.greedy_decode empty src": (lambda: _seq2seq().greedy_decode(np.zeros((B, 0), int), 3, 1, 2),
                                             ValueError, ["src must have a non-empty batch and sequence",
                                                          "got shape (2, 0)"]),
    "Transformer empty src": (lambda: _decoders()["Transformer"](np.zeros((B, 0, D)), np.zeros((B, S, D))),
                              ValueError, ["src and tgt must have a non-empty batch and sequence", f"src {(B, 0, D)}"]),
    **{f"{n} empty tgt": (_decoder_call(n, tgt=np.zeros((B, 0, D))), ValueError,
                          ["non-empty batch and sequence", f"tgt {(B, 0, D)}"])
       for n in ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")},
}


@pytest.mark.parametrize("case", list(DONE_WHEN))
def test_decoder_and_generation_errors_of_the_done_when_list(case):
    """The issue's list (memory of the wrong width, a mask for the wrong length, ids past max_len during
    generation, an empty prompt) at every entry point that takes that input: the message names the
    argument, what was expected and what was received."""
    fn, exc, needles = DONE_WHEN[case]
    expect(exc, fn, *needles)
