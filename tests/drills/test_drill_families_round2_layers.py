"""Round 2 of the mistake families (issue 24): the attention masks and projections, the composite
layers' residual streams, eps and ReLU backward, the position schemes, the embedding, dropout and the
learned position table (``families/learned_positions.py``). Each mistake below is written as a
candidate would spell it, not as the family's rewrite of the reference solution: the family names it
because the numbers agree, not the text."""

from __future__ import annotations

import pytest

import numpy_transformer.drills as drills
from numpy_transformer.drills import families
from tests.drills.drill_helpers import apply_patches, check_inprocess, first_diagnosis, solution_source

PE_LOOP = """
import numpy as np


def positional_encoding(S, D):
    pe = np.zeros((S, D))
    for pos in range(S):
        for i in range(0, D, 2):
            {body}
    return pe
"""

KV_SCORES = ("scores = np.where(blocked, -np.inf, (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh))",
             "scores = np.einsum('bhsd,bhnd->bhsn', q, K) / np.sqrt(Dh)")
DEC_FFN_RES = 'y, c_n3 = _ln_forward(h2 + f, p["gamma3"], p["beta3"])'
SA_CALL = "sa, c_sa = _mha_forward(tgt, tgt, [p[k] for k in SA], num_heads, tgt_mask)"
LPE_ROWS = "dW[offset:offset + s] = dy.sum(axis=0)"

CASES = [
    ("causal_attention_kv_cache", [("blocked = np.triu(np.ones((S, N), dtype=bool), k=N - S + 1)",
                                    "blocked = np.arange(N)[None, :] > np.arange(N - S, N)[:, None] + 1")],
     "attn_causal_off_by_one_future"),
    ("causal_attention_kv_cache", [KV_SCORES, ("P = e / e.sum(axis=-1, keepdims=True)",
                                               "P = (e / e.sum(axis=-1, keepdims=True)) * ~blocked")],
     "attn_mask_after_softmax"),
    ("flash_attention_backward", [("blocked = np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None]",
                                   "blocked = np.triu(np.ones((r1 - r0, c1 - c0), dtype=bool), k=1)")],
     "attn_causal_tile_local_indices"),
    ("multi_head_attention", [("dvh = np.swapaxes(P, -1, -2) @ dctx",
                               "dvh = np.einsum('bhst,bhtd->bhsd', P, dctx)")], "attn_dv_untransposed"),
    ("decoder_layer", [(SA_CALL, "tgt_mask = None if tgt_mask is None else np.logical_not(tgt_mask)\n    "
                        + SA_CALL)], "attn_mask_inverted"),
    ("cross_attention", [("qh = _split_heads(x @ Wq.T, H)", "qh = _split_heads(np.einsum('bsd,ed->bse', x, Wk), H)")],
     "proj_queries_with_Wk"),
    ("cross_attention", [("kh = _split_heads(memory @ Wk.T, H)", "kh = _split_heads(np.matmul(memory, Wv.T), H)")],
     "proj_keys_with_Wv"),
    ("decoder_layer", [(DEC_FFN_RES, 's3 = f + h1\n    y, c_n3 = _ln_forward(s3, p["gamma3"], p["beta3"])')],
     "residual_from_earlier_stream"),
    ("encoder_layer", [("        y = h + f\n", "        y = f + x\n")], "residual_from_earlier_stream"),
    ("encoder_layer", [("keepdims=True) + EPS)", "keepdims=True) + 0.000001)")], "layer_norm_eps_not_torch"),
    ("decoder_layer", [("da = dr * (a > 0)", "da = dr * np.clip(a, 0.0, None)")],
     "ffn_relu_backward_times_activation"),
    ("dropout", [("keep = rng.random(x.shape) >= p", "keep = rng.random((x.shape[-1],)) >= p")],
     "dropout_mask_broadcast"),
    ("dropout", [("    if not training:\n", "    training = not training\n    if not training:\n")],
     "dropout_training_flag_inverted"),
    ("embedding", [("dW = np.zeros((V, D), dtype=dout.dtype)", "dW = np.zeros((V, D), dtype=np.int64)")],
     "embedding_grad_integer_dtype"),
    ("embedding", [("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))",
                    "np.add.at(dW, ids.flatten(order='F'), dout.reshape(-1, D))")], "embedding_ids_dout_misaligned"),
    ("embedding", [("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))",
                    "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D) * (ids.reshape(-1, 1) != 0))")],
     "embedding_row0_as_padding"),
    ("learned_positions", [(LPE_ROWS, "dW[offset:offset + s] = dy.sum(axis=1).sum(axis=0)")],
     "lpe_grad_summed_over_positions"),
    ("learned_positions", [(LPE_ROWS, "dW[offset:offset + s] = np.sum(dy[:, s - 1], axis=0)")],
     "lpe_grad_one_position_only"),
    ("learned_positions", [(LPE_ROWS, "dW[0:s] = np.sum(dy, axis=0)")], "lpe_grad_rows_ignore_offset"),
    ("positional_encoding", None, "pe_frequency_odd_index",
     "a = pos / 10000 ** ((i + 1) / D); pe[pos, i] = np.sin(a); pe[pos, i + 1] = np.cos(a)"),
    ("positional_encoding", None, "pe_positions_normalised",
     "a = (pos / S) / 10000 ** (i / D); pe[pos, i] = np.sin(a); pe[pos, i + 1] = np.cos(a)"),
    ("rope", [("out[..., second] = a * sin + b * cos", "out[..., second] = a * cos + b * sin")],
     "rope_rotation_factors_mixed"),
    ("alibi", [("return alibi_slopes(num_heads)[:, None, None] * rel[None]",
                "return np.flip(alibi_slopes(num_heads))[:, None, None] * rel[None]")], "alibi_slopes_reversed"),
    ("alibi", [("rel = np.arange(t)[None, :] - (np.arange(s)[:, None] + t - s)",
                "rel = np.arange(t)[None, :] - np.arange(s)[:, None] + (t - s)")], "positions_offset_wrong_sign"),
]


def test_learned_positions_declares_its_op_and_every_family_applies():
    ex = drills.EXERCISES["learned_positions"]
    assert "learned_positions" in ex.ops
    ids = {m.id for m in ex.families}
    for fam in families.families_of("learned_positions"):
        assert fam.id in ids, fam.id


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_round2_mistake_in_the_candidates_spelling_is_named(case, tmp_path):
    name, patches, family = case[:3]
    if patches is None:
        src = PE_LOOP.format(body=case[3].replace("; ", "\n            "))
    else:
        src = apply_patches(solution_source(name), patches)
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    rc, out = check_inprocess(path, exercise=name, cases=12)
    assert rc == 1, out
    assert first_diagnosis(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in " ".join(out.split())
