"""``plot``: PNG pictures of a model and a run (needs matplotlib: ``pip install matplotlib``).

  plot attention CHECKPOINT --tokens "5 9 3 ..." [--layer i] --out attention.png
      every head's attention weights of one layer, as heatmaps with the tokens on both axes
      (``--random`` takes a held-out example of the checkpoint's task instead of --tokens)
  plot positional [--d-model 128 --max-len 100] --out positional.png
      the sinusoidal table as a heatmap and a few dimensions as sin/cos curves
      (``--checkpoint CKPT`` draws that model's table, learned or sinusoidal)
  plot training LOG --out training.png
      loss, accuracy and learning-rate curves from a ``train`` log (run.log.jsonl)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from . import parse_tokens

_DESCRIPTION = __doc__


def register(subparsers):
    p = subparsers.add_parser("plot", help="PNG pictures: attention heatmaps, positional encoding, training curves",
                              description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", metavar="WHAT")
    sub.required = True

    a = sub.add_parser("attention", help="every head's attention weights of one layer of a checkpoint")
    a.add_argument("checkpoint", help="a .npz written by train --save")
    src = a.add_mutually_exclusive_group()
    src.add_argument("--tokens", metavar="IDS", help='the input sequence, e.g. --tokens "5 9 3 7" (as many as the '
                     "model was trained on, as predict takes them)")
    src.add_argument("--random", action="store_true", help="a random held-out example of the checkpoint's task "
                     "(the default when --tokens is not given)")
    a.add_argument("--seed", type=int, help="which random held-out example (default: a fresh one each time)")
    a.add_argument("--layer", type=int, default=0, help="encoder layer (default 0; negative counts from the end)")
    a.add_argument("--out", default="attention.png", help="PNG to write (default attention.png)")
    a.set_defaults(func=run_attention)

    q = sub.add_parser("positional", help="a position scheme: the sinusoidal or a learned table, rotary angles and "
                       "scores, ALiBi's biases, T5's relative buckets")
    q.add_argument("--kind", choices=["sinusoidal", "learned", "rope", "alibi", "relative"], default=None,
                   help="which scheme (default sinusoidal, or the checkpoint's); learned needs --checkpoint, "
                        "relative draws a checkpoint's learned biases when given one")
    q.add_argument("--nhead", type=int, default=8, help="alibi/relative: heads (default 8)")
    q.add_argument("--head-dim", type=int, default=64, help="rope: head dimension Dh, even (default 64)")
    q.add_argument("--d-model", type=int, default=128, help="model width (default 128)")
    q.add_argument("--max-len", type=int, default=100, help="positions drawn (default 100)")
    q.add_argument("--checkpoint", help="draw this checkpoint's table instead (its learned pos_embed, or the "
                   "sinusoidal table of its size)")
    q.add_argument("--dims", type=int, nargs="+", metavar="I", help="dimensions drawn as curves "
                   "(default: 0, 1 and a few slower ones)")
    q.add_argument("--out", default="positional.png", help="PNG to write (default positional.png)")
    q.set_defaults(func=run_positional)

    t = sub.add_parser("training", help="loss and accuracy curves (train and validation) from a train log")
    t.add_argument("log", help="the JSON-lines log written by train (run.npz -> run.log.jsonl)")
    t.add_argument("--smooth", type=int, metavar="N", help="moving average over N log lines (default ~1/50 of the run)")
    t.add_argument("--out", default="training.png", help="PNG to write (default training.png)")
    t.set_defaults(func=run_training)


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _guarded(draw):
    """Run ``draw()``; turn a missing matplotlib and bad inputs into an error message and status 2."""
    from ..plotting import MatplotlibMissing       # CheckpointError is a ValueError: caught below
    try:
        out = draw()
    except MatplotlibMissing as exc:
        return _error(str(exc))
    except (ValueError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        return _error(str(exc))
    print(f"wrote {out}")
    return 0


def run_attention(args):
    def draw():
        from ..checkpoint import load_checkpoint
        from ..data import make_task
        from ..plotting import attention_weights, plot_attention, token_labels
        from ..training import checkpoint_config
        ckpt = load_checkpoint(args.checkpoint)
        if ckpt.model_kind != "encoder":
            raise ValueError(f"plot attention draws encoder checkpoints (train --model encoder); "
                             f"{args.checkpoint} holds a {ckpt.model_kind} model")
        model = ckpt.build_model()
        mc = ckpt.model_config
        nlayers = len(model.encoder.layers)
        if not -nlayers <= args.layer < nlayers:
            raise ValueError(f"--layer must be in [0, {nlayers}) (or negative from the end), got {args.layer}")
        layer = args.layer % nlayers
        if args.tokens:                  # the length it was trained on (a bare checkpoint: its max_len)
            length = checkpoint_config(ckpt).seq_len if ckpt.config else mc["max_len"]
            ids = np.array([parse_tokens(args.tokens, length, mc["vocab_size"])], dtype=np.int64)
            what = "given tokens"
        else:
            c = checkpoint_config(ckpt)
            val = make_task(c.task, c.vocab_size, c.seq_len, c.num_train, c.num_val, seed=c.seed).val_src
            k = int(np.random.default_rng(args.seed).integers(len(val)))
            ids = val[k:k + 1]
            what = f"held-out example {k}"
            print(f"input (held-out example {k}): {' '.join(str(int(i)) for i in ids[0])}")
        weights = attention_weights(model, ids)[layer][0]                    # (H, S, S)
        pred = model.eval()(ids).argmax(-1)[0]
        labels = token_labels(ids[0])
        task = (ckpt.config or {}).get("task")
        step = ckpt.extra_json.get("step")
        title = (f"layer {layer} self-attention, {weights.shape[0]} heads ({what})\n{args.checkpoint}"
                 + (f": task {task}" if task else "") + (f", step {step}" if step is not None else "")
                 + (f"; prediction: {' '.join(token_labels(pred))}" if len(pred) <= 32 else ""))
        return plot_attention(weights, args.out, labels, title=title)
    return _guarded(draw)


def _positional_kind(args):
    """--kind rope | alibi | relative | learned (sinusoidal: run_positional's own path)."""
    from .. import plot_positions as P
    if args.max_len <= 0:
        raise ValueError(f"--max-len must be positive, got {args.max_len}")
    ckpt = None
    if args.checkpoint:
        from ..checkpoint import load_checkpoint
        ckpt = load_checkpoint(args.checkpoint)
    if args.kind == "rope":
        if args.head_dim <= 0 or args.head_dim % 2:
            raise ValueError(f"--head-dim must be a positive even number, got {args.head_dim}")
        return P.plot_rope(args.out, head_dim=args.head_dim, max_len=args.max_len)
    if args.nhead <= 0:
        raise ValueError(f"--nhead must be positive, got {args.nhead}")
    if args.kind == "alibi":
        return P.plot_alibi(args.out, num_heads=args.nhead, max_len=min(args.max_len, 64))
    if args.kind == "relative":
        state = {} if ckpt is None else ckpt.model_state
        key = next((k for k in state if k.endswith("relative_attention_bias.weight")), None)
        if ckpt is not None and key is None:
            raise ValueError(f"--checkpoint {args.checkpoint} has no relative position bias (it was not trained "
                             "with --pos-encoding relative)")
        weight = None if key is None else state[key]
        n = 32 if weight is None else weight.shape[0]
        causal = ckpt is not None and "block_size" in ckpt.model_config        # a GPT: causal buckets
        return P.plot_relative(args.out, num_buckets=n, bidirectional=not causal, weight=weight,
                               title=None if ckpt is None else f"relative position bias of {args.checkpoint}")
    if ckpt is None:
        raise ValueError("--kind learned draws a checkpoint's table: give --checkpoint CKPT (trained with "
                         "--pos-encoding learned)")
    key = next((k for k in ("pos_embed.weight", "wpe.weight") if k in ckpt.model_state), None)
    if key is None:
        raise ValueError(f"--checkpoint {args.checkpoint} has no learned position table")
    return P.plot_learned(ckpt.model_state[key], args.out, title=f"learned positions of {args.checkpoint}")


def run_positional(args):
    def draw():
        if args.kind not in (None, "sinusoidal"):
            return _positional_kind(args)
        from ..nn import sinusoidal_table
        from ..plotting import plot_positional
        if args.checkpoint:
            from ..checkpoint import load_checkpoint
            ckpt = load_checkpoint(args.checkpoint)
            mc = ckpt.model_config
            if mc.get("pos_encoding") == "learned":
                table = ckpt.model_state["pos_embed.weight"]
                return plot_positional(table, args.out, dims=args.dims, sinusoidal=False,
                                       title=f"learned positions of {args.checkpoint}")
            table = sinusoidal_table(mc["max_len"], mc["d_model"])
            return plot_positional(table, args.out, dims=args.dims,
                                   title=f"sinusoidal positions of {args.checkpoint}")
        for name in ("d_model", "max_len"):
            if getattr(args, name) <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
        table = sinusoidal_table(args.max_len, args.d_model)
        return plot_positional(table, args.out, dims=args.dims,
                               title=f"sinusoidal positional encoding, d_model {args.d_model}")
    return _guarded(draw)


def run_training(args):
    def draw():
        import os
        from ..plotting import plot_training
        from ..runlog import read_log
        if not os.path.exists(args.log):
            raise FileNotFoundError(f"log {args.log} does not exist (train writes it next to --save: "
                                    "run.npz -> run.log.jsonl)")
        if args.smooth is not None and args.smooth <= 0:
            raise ValueError(f"--smooth must be positive, got {args.smooth}")
        entries = read_log(args.log)
        start = next((e for e in entries if e.get("kind") == "start"), {})
        cfg = start.get("config") or {}
        title = f"training log {args.log}"
        if cfg:
            title += (f"\ntask {cfg.get('task')}, d_model {cfg.get('d_model')}, {cfg.get('num_layers')} layers, "
                      f"{cfg.get('optimizer')} lr {cfg.get('lr')}")
        return plot_training(entries, args.out, title=title, window=args.smooth)
    return _guarded(draw)
