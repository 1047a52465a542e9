"""``demo``: the seed design's encoder block (or, with ``--block decoder``, one decoder block), forward
and backward in NumPy, every step traced.

Default configuration (the seed design's): vocab 10000, d_model 512, 8 heads, feed-forward 2048,
dropout 0.1, batch 4, sequence 10. With torch installed, the same computation is repeated by the
PyTorch oracle (same weights, same dropout masks) and the max error of every gradient is printed.

``--block decoder``: the target ids go through the embedding and positions into one
TransformerDecoderLayer with the causal tgt_mask, attending a random memory (B, T, D) (what an
encoder would hand it; T = --memory-len, 12 by default, unlike S); the trace shows the causal
self-attention (B, H, S, S), the cross-attention (B, H, S, T), their softmax row sums and the
feed-forward, and the oracle is torch.nn.TransformerDecoderLayer with our weights (its attention and
dropout modules replaced by twins that replay our dropout masks while dropout > 0); it compares the
output, dL/dtgt, dL/dmemory and every parameter's gradient.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .. import nn, oracle
from ..study.trace import trace
from ..utils.text import fit
from . import nonnegative_int, positive_int, probability


def register(subparsers):
    p = subparsers.add_parser("demo", help="run one encoder (or decoder) block forward and backward with a full "
                              "trace", description=__doc__)
    p.add_argument("--block", choices=["encoder", "decoder"], default="encoder",
                   help="encoder (default): one TransformerEncoderLayer; decoder: one TransformerDecoderLayer with "
                   "the causal mask and cross-attention to a memory")
    p.add_argument("--vocab", type=positive_int, default=10000, help="vocabulary size V (default 10000)")
    p.add_argument("--d-model", type=positive_int, default=512, help="model width D (default 512)")
    p.add_argument("--nhead", type=positive_int, default=8, help="attention heads H (default 8)")
    p.add_argument("--dim-feedforward", type=positive_int, default=2048, help="feed-forward width F (default 2048)")
    p.add_argument("--dropout", type=probability, default=0.1, help="dropout probability (default 0.1)")
    p.add_argument("--batch", type=positive_int, default=4, help="batch size B (default 4)")
    p.add_argument("--seq-len", type=positive_int, default=10, help="sequence length S (default 10)")
    p.add_argument("--memory-len", type=positive_int, default=12, help="--block decoder: the memory's length T "
                   "(default 12)")
    p.add_argument("--activation", choices=nn.activations.ACTIVATION_NAMES, default="relu")
    p.add_argument("--norm-first", action="store_true", help="pre-LN instead of post-LN")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float64",
                   help="float64 (default) makes the oracle comparison exact to ~1e-15")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    p.add_argument("--trace", action="store_true",
                   help="also trace the backward: every sub-layer's input gradient, with health flags")
    p.set_defaults(func=run)


class DemoModel(nn.Module):
    """The seed design's pipeline: TokenEmbedding -> PositionalEncoding -> one TransformerEncoderLayer."""

    def __init__(self, vocab, d_model, nhead, dim_feedforward, dropout, activation, norm_first, dtype, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.embedding = nn.TokenEmbedding(vocab, d_model, dtype=dtype, seed=rng)
        self.pos_encoding = nn.PositionalEncoding(d_model, dtype=dtype)
        self.encoder_block = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation=activation, norm_first=norm_first,
            dtype=dtype, seed=rng)

    def forward(self, ids):
        self.encoder_block_output = self.encoder_block(self.pos_encoding(self.embedding(ids)))  # (B, S, D)
        return self.encoder_block_output

    def backward(self, dout):
        self.embedding.backward(self.pos_encoding.backward(self.encoder_block.backward(dout)))


class DecoderDemoModel(nn.Module):
    """TokenEmbedding -> PositionalEncoding -> one TransformerDecoderLayer (causal tgt_mask) over a memory."""

    def __init__(self, vocab, d_model, nhead, dim_feedforward, dropout, activation, norm_first, dtype, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.embedding = nn.TokenEmbedding(vocab, d_model, dtype=dtype, seed=rng)
        self.pos_encoding = nn.PositionalEncoding(d_model, dtype=dtype)
        self.decoder_block = nn.TransformerDecoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation=activation, norm_first=norm_first,
            dtype=dtype, seed=rng)

    def forward(self, ids, memory):
        x = self.pos_encoding(self.embedding(ids))                               # (B, S, D)
        causal = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], x.dtype)  # (S, S), -inf above
        self.decoder_block_output = self.decoder_block(x, memory, tgt_mask=causal, tgt_is_causal=True)
        return self.decoder_block_output                                         # (B, S, D)

    def backward(self, dout):
        self.dtgt, self.dmemory = self.decoder_block.backward(dout)             # (B, S, D), (B, T, D)
        self.embedding.backward(self.pos_encoding.backward(self.dtgt))
        return self.dmemory


def _health(records, d_model, norm_first=False):
    """The seed design's checks on the traced forward, as (check, value, verdict) rows."""
    by_name = {r.name: r for r in records if r.phase == "forward"}
    rows = []
    emb = by_name.get("embedding")
    if emb is not None:
        ok = 0.5 < emb.std < 1.5
        rows.append(("embedding std (expect ~1: needs the sqrt(d_model) scale)", f"{emb.std:.3f}", ok))
    scores = [r for r in records if "scores" in r.name and r.phase == "forward"]
    softmax = [r for r in records if r.name.endswith(".softmax") and r.phase == "forward"]
    several = len(scores) > 1                                # the decoder: self- and cross-attention
    for r in scores if several else scores[:1]:
        ok = -10 <= r.min and r.max <= 10
        what = f"{r.name.split('.')[-2]} {r.shape} " if several else ""
        rows.append((f"{what}attention scores range (expect within [-10, 10])", f"[{r.min:.2f}, {r.max:.2f}]", ok))
    for r in softmax if several else softmax[:1]:
        what = f"{r.name.split('.')[-2]} " if several else ""
        rows.append((f"{what}softmax row sums (expect 1)", r.note.replace("row sums in ", ""), not r.flag))
    out = by_name.get("encoder_block") or by_name.get("decoder_block")
    if out is not None and not norm_first:             # a pre-LN block's output is not normalised
        ok = abs(out.mean) < 0.1 and 0.8 < out.std < 1.2
        rows.append(("block output mean/std (post-LN: expect ~0 / ~1)", f"{out.mean:.4f} / {out.std:.4f}", ok))
    bad = [f"{r.name} ({r.phase})" for r in records if "NaN/inf" in r.flag]
    rows.append(("NaN or inf anywhere (first layer)", bad[0] if bad else "none", not bad))
    flagged = [r for r in records if r.flag and "NaN/inf" not in r.flag]
    for r in flagged:
        rows.append((f"{r.name} ({r.phase})", r.flag, False))
    return rows


def run(args):
    dtype = np.dtype(args.dtype)
    t0 = time.perf_counter()
    if args.d_model % args.nhead:
        print(f"error: --d-model must be divisible by --nhead, got {args.d_model} and {args.nhead}", file=sys.stderr)
        return 2
    if args.seq_len > 5000:
        print(f"error: --seq-len must be at most 5000 (the positional table's max_len), got {args.seq_len}",
              file=sys.stderr)
        return 2
    decoder = args.block == "decoder"
    model = (DecoderDemoModel if decoder else DemoModel)(args.vocab, args.d_model, args.nhead, args.dim_feedforward,
                                                          args.dropout, args.activation, args.norm_first, dtype,
                                                          args.seed)
    rng = np.random.default_rng(args.seed + 1)
    ids = rng.integers(0, args.vocab, size=(args.batch, args.seq_len))
    print(fit(f"numpy-transformer demo{' (decoder block)' if decoder else ''}: V={args.vocab} D={args.d_model} "
              f"H={args.nhead} Dh={args.d_model // args.nhead} F={args.dim_feedforward} dropout={args.dropout} "
              f"B={args.batch} S={args.seq_len}{f' T={args.memory_len}' if decoder else ''} {args.activation} "
              f"{'pre-LN' if args.norm_first else 'post-LN'} {args.dtype}\n"))
    inputs = (ids,)
    if decoder:
        memory = rng.standard_normal((args.batch, args.memory_len, args.d_model)).astype(dtype)
        inputs = (ids, memory)
        print(fit(f"target ids {ids.shape} int, in [0, {args.vocab}); memory {memory.shape} random normal "
                  f"(what an encoder would hand the decoder)"))
        print(fit(f"causal tgt_mask ({args.seq_len}, {args.seq_len}): -inf above the diagonal (position i sees "
                  f"0..i); cross-attention: every target position sees all {args.memory_len} memory positions\n"))
    else:
        print(f"input ids {ids.shape} int, in [0, {args.vocab})\n")

    print("FORWARD (every sub-layer's output)")
    with trace(model) as t:
        y = model(*inputs)
    print(t.table(phase="forward"))
    pe0 = model.pos_encoding.pe[0, :6]
    print(f"\npositional encoding row 0 (expect 0, 1, 0, 1, ...): {np.array2string(pe0, precision=3)}")

    dy = rng.standard_normal(y.shape).astype(dtype)          # a random upstream gradient
    print("\nBACKWARD (random upstream gradient dL/dy, every parameter's gradient)")
    if args.trace:
        with trace(model) as tb:
            model.backward(dy)
        print(tb.table(phase="backward"))
        print()
        t.records.extend(tb.records)
    else:
        model.backward(dy)
    header = f"{'parameter':<44} {'shape':<14} {'grad mean':>11} {'grad std':>11} {'max |grad|':>11}"
    print(header)
    print("-" * len(header))
    for name, p in model.named_parameters():
        g = p.grad
        print(f"{name:<44} {str(g.shape):<14} {g.mean():>11.3e} {g.std():>11.3e} {np.abs(g).max():>11.3e}")
    if decoder:
        for name, g in (("(input) dL/dtgt, the block's target input", model.dtgt),
                        ("(input) dL/dmemory, through cross-attention", model.dmemory)):
            print(f"{name:<44} {str(g.shape):<14} {g.mean():>11.3e} {g.std():>11.3e} {np.abs(g).max():>11.3e}")

    print("\nHEALTH CHECKS (the seed design's dimension-tracking table)")
    for check, value, ok in _health(t.records, args.d_model, args.norm_first):
        print(f"  [{'ok' if ok else '!!'}] {check}: {value}")

    if not args.no_torch:
        _compare_with_torch(model, inputs, dy, dtype)
    print(f"\ndone in {time.perf_counter() - t0:.2f} s")
    return 0


def _compare_with_torch(model, inputs, dy, dtype):
    try:
        demo_check = oracle.load("check.demo")
    except oracle.OracleUnavailable as exc:
        print(f"\nPyTorch comparison skipped: {exc}")
        return
    print("\nAGAINST THE PYTORCH ORACLE (same weights, same dropout masks; autograd gradients)")
    if isinstance(model, DecoderDemoModel):
        rows, oracle_name = demo_check.compare_decoder_demo(model, *inputs, dy)
        print(fit(f"(the decoder block: {oracle_name})"))
    else:
        rows = demo_check.compare_demo(model, *inputs, dy)
    width = max(50, max(len(r[0]) for r in rows))
    header = f"{'tensor':<{width}} {'max abs err':>12} {'max rel err':>12}"
    print(header)
    print("-" * len(header))
    for name, abs_err, rel_err in rows:
        print(f"{name:<{width}} {abs_err:>12.3e} {rel_err:>12.3e}")
    worst = max(r[2] for r in rows)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    print(f"largest relative error {worst:.3e} ({'within' if worst <= tol else 'ABOVE'} {tol:g})")
