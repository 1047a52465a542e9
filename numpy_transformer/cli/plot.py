"""``plot``: PNG pictures of a model and a run, and an interactive HTML page of its attention (the PNGs
need matplotlib: ``pip install matplotlib``).

  plot attention CHECKPOINT --tokens "5 9 3 ..." [--layer i] --out attention.png
      without --layer (or with --all): every layer and every head in one grid (rows the layers,
        columns the heads), the axes labelled position:token (3:cat); with --layer i: that layer's
        heads, one larger panel each;
  plot attention CHECKPOINT --html attention.html
      the same weights as ONE self-contained page (no network, no server): pick the layer, the head
        (or all heads) and a token, and see its weights as lines and as a heatmap;
      which attention:
      encoder: its self-attention, the tokens on both axes;
      seq2seq: the decoder's cross-attention, target tokens (rows: the model's greedy decode of the
        source --tokens) against source tokens (columns); --which self: its causal self-attention;
      gpt: a block's causal self-attention over the prompt (--tokens "123+456") and its greedy
        answer (``--random`` takes a held-out example of the checkpoint's task instead of --tokens);
      a language model (a train --text checkpoint, a Hugging Face folder, a GPT saved from Python):
        a block's causal self-attention over --tokens (text through its tokenizer, else token ids)
        or, for a text checkpoint, a held-out window of its text
  plot positional [--d-model 128 --max-len 100] --out positional.png
      the sinusoidal table as a heatmap and a few dimensions as sin/cos curves
      (``--checkpoint CKPT`` draws that model's table, learned or sinusoidal)
  plot training LOG [LOG ...] [--labels A B ...] --out training.png
      loss, accuracy and learning-rate curves from a ``train`` log (run.log.jsonl); several logs are
      overlaid on shared axes, one colour each, named by --labels (default: the file names)
  plot gradients LOG [LOG ...] [--labels A B ...] --out gradients.png
      gradient norms by layer over training (vanishing, exploding), from ``train --trace-every`` logs;
      several (pre-LN against post-LN) are overlaid on shared axes

``--out`` names the file written (``.png`` is added to a name without an extension); an existing
directory, or a path ending in ``/``, gets the default name inside it (``--out figs`` writes
``figs/training.png``). The path written is printed: ``wrote figs/training.png``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..study.attention_maps import attention_modules, attention_weights
from ..study.plot_positions import KINDS as POSITION_KINDS
from .plot_inputs import INPUTS as _INPUTS
from .plot_inputs import input_of as _input_of

_DESCRIPTION = __doc__


def register(subparsers):
    p = subparsers.add_parser("plot", help="PNG pictures: attention heatmaps (or an HTML page), positional "
                              "encoding, training curves",
                              description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", metavar="WHAT")
    sub.required = True

    a = sub.add_parser("attention", help="a checkpoint's attention weights: every layer and head in one grid, "
                       "one layer (--layer), or an interactive page (--html)")
    a.add_argument("checkpoint", help="a .npz written by train --save (or saved from Python), or a Hugging Face folder")
    src = a.add_mutually_exclusive_group()
    src.add_argument("--tokens", metavar="IDS", help='the input, as predict takes it: encoder: e.g. "5 9 3 7" (as '
                     'many as the model was trained on); seq2seq: the source ids; gpt: an addition, "123+456"; '
                     'a language model (train --text, a Hugging Face folder): text, or ids without a tokenizer')
    src.add_argument("--random", action="store_true", help="a random held-out example of the checkpoint's task "
                     "(a text checkpoint: a held-out window; the default when --tokens is not given)")
    a.add_argument("--seed", type=int, help="which random held-out example (default: a fresh one each time)")
    layers = a.add_mutually_exclusive_group()
    layers.add_argument("--layer", type=int, default=None, help="draw only this encoder layer, decoder layer "
                        "(seq2seq) or block (gpt), one panel per head (negative counts from the end; default: "
                        "every layer, in one grid)")
    layers.add_argument("--all", action="store_true", help="every layer and head in one grid, rows the layers, "
                        "columns the heads (the default when no --layer is given)")
    a.add_argument("--which", metavar="self|cross", help="seq2seq: the decoder's cross-attention (cross, the "
                   "default) or its causal self-attention (self); encoder and gpt: self only")
    a.add_argument("--out", default="attention.png", type=_out_path("attention.png"),
                   help=OUT_HELP.format("attention.png"))
    a.add_argument("--html", metavar="OUT.html", help="write an interactive page of every layer's and head's weights "
                   "instead of the PNG: one self-contained file (inline script, the weights as JSON, no network), "
                   "where you pick the layer, the head (or all heads) and a token")
    a.set_defaults(func=run_attention)

    q = sub.add_parser("positional", help="a position scheme: the sinusoidal or a learned table, rotary angles and "
                       "scores, ALiBi's biases, T5's relative buckets")
    q.add_argument("--kind", choices=POSITION_KINDS, default=None,
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
    q.add_argument("--out", default="positional.png", type=_out_path("positional.png"),
                   help=OUT_HELP.format("positional.png"))
    q.set_defaults(func=run_positional)

    t = sub.add_parser("training", help="loss and accuracy curves (train and validation) from a train log")
    t.add_argument("log", nargs="+", help="the JSON-lines log written by train (run.npz -> run.log.jsonl); several "
                   "are overlaid on shared axes")
    t.add_argument("--labels", nargs="+", metavar="NAME", help="the logs' names in the legend, one per log "
                   "(default: the file names)")
    t.add_argument("--smooth", type=int, metavar="N", help="moving average over N log lines (default ~1/50 of the run)")
    t.add_argument("--out", default="training.png", type=_out_path("training.png"),
                   help=OUT_HELP.format("training.png"))
    t.set_defaults(func=run_training)

    g = sub.add_parser("gradients", help="gradient norms by layer over training, from a train --trace-every log")
    g.add_argument("log", nargs="+", help="the JSON-lines log written by train --trace-every N (run.npz -> "
                   "run.log.jsonl); several (pre-LN, post-LN) are overlaid on shared axes")
    g.add_argument("--labels", nargs="+", metavar="NAME", help="the logs' names in the legend, one per log "
                   "(default: the file names)")
    g.add_argument("--out", default="gradients.png", type=_out_path("gradients.png"),
                   help=OUT_HELP.format("gradients.png"))
    g.set_defaults(func=run_gradients)


OUT_HELP = ("file to write (default {0}; .png is added to a name without an extension; an existing directory, or "
            "a path ending in /, gets {0} inside it); the path written is printed")


def _out_path(default_name):
    """The ``--out`` argparse type: the path the figure will be written to, as printed after it is."""
    def out_path(value):
        if value.endswith(("/", os.sep)) or os.path.isdir(value):
            return os.path.join(value, default_name)
        return value if os.path.splitext(value)[1] else value + ".png"       # what matplotlib would write
    return out_path


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _guarded(draw):
    """Run ``draw()``; turn a missing matplotlib and bad inputs into an error message and status 2."""
    from ..study.plotting import MatplotlibMissing  # CheckpointError is a ValueError: caught below
    try:
        out = draw()
    except MatplotlibMissing as exc:
        return _error(str(exc))
    except (ValueError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError, ImportError) as exc:
        return _error(str(exc))
    print(f"wrote {out}")
    return 0


def run_attention(args):
    def draw():
        from ..study import plotting
        from ..study.attention_html import attention_html
        from .model_source import open_model
        if args.which is not None and args.which not in ("self", "cross"):
            raise ValueError(f"--which must be 'self' or 'cross', got {args.which!r}")
        if args.html is not None and args.layer is not None:
            raise ValueError(f"--html draws every layer (the page picks one): drop --layer {args.layer}")
        opened = open_model(args.checkpoint)
        kind = opened.model_kind
        if kind not in _INPUTS:
            raise ValueError(f"plot attention draws encoder, seq2seq and gpt checkpoints; {args.checkpoint} "
                             f"holds a {kind} model")
        if args.which == "cross" and kind != "seq2seq":
            raise ValueError(f"--which cross: the {kind} model in {args.checkpoint} has no "
                             "cross-attention (only a seq2seq model's decoder has one); use --which self")
        model = opened.model
        which, attns, layer_word = attention_modules(model, args.which)
        n = len(attns)
        if args.layer is not None and not -n <= args.layer < n:
            raise ValueError(f"--layer must be in [0, {n}) (the model's {n} {layer_word}s; negative counts from "
                             f"the end), got {args.layer}")
        p = _input_of(args, opened)
        every = [w[0][:, :len(p.rows), :len(p.cols)]                       # (H, S, T) each: padding dropped
                 for w in attention_weights(model, *p.inputs, which=which, **p.kwargs)]
        task = getattr(opened.config, "task", None)
        step = None if opened.ckpt is None else opened.ckpt.extra_json.get("step")
        causal = " (causal)" if opened.model_kind != "encoder" and which == "self" else ""
        kind = {"cross": "cross-attention", "self": "self-attention"}[which]
        source = (f"{args.checkpoint}" + (f": task {task}" if task else "")
                  + (f", step {step}" if step is not None else "")
                  + (f"; {p.note}" if p.note and len(p.note) <= 80 else ""))
        heads = every[0].shape[0]
        if args.html is not None:
            attention_html(every, out=args.html, query_labels=plotting.position_labels(p.rows),
                           key_labels=plotting.position_labels(p.cols), layer_name=layer_word,
                           title=f"{kind}{causal}, {n} {layer_word}s x {heads} heads ({p.what})\n{source}",
                           query_name=p.query_name, key_name=p.key_name)
            return args.html
        if args.layer is None:
            plotting.plot_attention_grid(every, out=args.out, query_labels=plotting.position_labels(p.rows),
                                         key_labels=plotting.position_labels(p.cols), layer_name=layer_word,
                                         title=f"every {layer_word}'s {kind}{causal} (rows), {heads} heads "
                                               f"(columns) ({p.what})\n{source}",
                                         query_name=p.query_name, key_name=p.key_name)
            return args.out
        layer = args.layer % n
        title = f"{layer_word} {layer} {kind}{causal}, {heads} heads ({p.what})\n{source}"
        plotting.plot_attention(every[layer], args.out, p.rows, p.cols, title=title, query_name=p.query_name,
                                key_name=p.key_name)
        return args.out
    return _guarded(draw)


def _positional_kind(args):
    """--kind rope | alibi | relative | learned (sinusoidal: run_positional's own path)."""
    from ..study import plot_positions as P
    if args.max_len <= 0:
        raise ValueError(f"--max-len must be positive, got {args.max_len}")
    ckpt = None
    if args.checkpoint:
        from ..training.checkpoint import load_checkpoint
        ckpt = load_checkpoint(args.checkpoint)
    if args.kind == "rope":
        if args.head_dim <= 0 or args.head_dim % 2:
            raise ValueError(f"--head-dim must be a positive even number, got {args.head_dim}")
        P.plot_rope(out=args.out, head_dim=args.head_dim, max_len=args.max_len)
        return args.out
    if args.nhead <= 0:
        raise ValueError(f"--nhead must be positive, got {args.nhead}")
    if args.kind == "alibi":
        P.plot_alibi(out=args.out, num_heads=args.nhead, max_len=min(args.max_len, 64))
        return args.out
    if args.kind == "relative":
        state = {} if ckpt is None else ckpt.model_state
        key = next((k for k in state if k.endswith("relative_attention_bias.weight")), None)
        if ckpt is not None and key is None:
            raise ValueError(f"--checkpoint {args.checkpoint} has no relative position bias (it was not trained "
                             "with --pos-encoding relative)")
        weight = None if key is None else state[key]
        n = 32 if weight is None else weight.shape[0]
        causal = ckpt is not None and "block_size" in ckpt.model_config        # a GPT: causal buckets
        P.plot_relative(out=args.out, num_buckets=n, bidirectional=not causal, weight=weight,
                        title=None if ckpt is None else f"relative position bias of {args.checkpoint}")
        return args.out
    if ckpt is None:
        raise ValueError("--kind learned draws a checkpoint's table: give --checkpoint CKPT (trained with "
                         "--pos-encoding learned)")
    key = next((k for k in ("pos_embed.weight", "wpe.weight") if k in ckpt.model_state), None)
    if key is None:
        raise ValueError(f"--checkpoint {args.checkpoint} has no learned position table")
    P.plot_learned(ckpt.model_state[key], out=args.out, title=f"learned positions of {args.checkpoint}")
    return args.out


def run_positional(args):
    def draw():
        if args.kind not in (None, "sinusoidal"):
            return _positional_kind(args)
        from ..nn import sinusoidal_table
        from ..study.plotting import plot_positional
        if args.checkpoint:
            from ..training.checkpoint import load_checkpoint
            ckpt = load_checkpoint(args.checkpoint)
            mc = ckpt.model_config
            if mc.get("pos_encoding") == "learned":
                table = ckpt.model_state["pos_embed.weight"]
                plot_positional(table, out=args.out, dims=args.dims, sinusoidal=False,
                                title=f"learned positions of {args.checkpoint}")
                return args.out
            table = sinusoidal_table(mc["max_len"], mc["d_model"])
            plot_positional(table, out=args.out, dims=args.dims, title=f"sinusoidal positions of {args.checkpoint}")
            return args.out
        for name in ("d_model", "max_len"):
            if getattr(args, name) <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
        table = sinusoidal_table(args.max_len, args.d_model)
        plot_positional(table, out=args.out, dims=args.dims,
                        title=f"sinusoidal positional encoding, d_model {args.d_model}")
        return args.out
    return _guarded(draw)


def _read_log(path):
    from ..training.runlog import read_log
    if not os.path.exists(path):
        raise FileNotFoundError(f"log {path} does not exist (train writes it next to --save: "
                                "run.npz -> run.log.jsonl)")
    return read_log(path)


def _log_title(path, entries):
    start = next((e for e in entries if e.get("kind") == "start"), {})
    cfg = start.get("config") or {}
    title = f"training log {path}"
    if cfg:
        title += (f"\ntask {cfg.get('task')}, d_model {cfg.get('d_model')}, {cfg.get('num_layers')} layers, "
                  f"{'pre' if cfg.get('norm_first') else 'post'}-LN, {cfg.get('optimizer')} lr {cfg.get('lr')}")
    return title


def _logs(args):
    """``(logs, labels, title)`` of the LOG arguments: one log's title describes its run; several are
    named by --labels (one per log) or by their file names."""
    if args.labels is not None and len(args.labels) != len(args.log):
        raise ValueError(f"--labels: {len(args.labels)} label(s) for {len(args.log)} log(s); give one per log")
    logs = [_read_log(path) for path in args.log]
    if len(logs) == 1:
        return logs, args.labels, _log_title(args.log[0], logs[0])
    labels = args.labels or [os.path.basename(path).removesuffix(".jsonl").removesuffix(".log") for path in args.log]
    return logs, labels, "training logs " + ", ".join(f"{name} ({path})" for name, path in zip(labels, args.log))


def run_gradients(args):
    def draw():
        from ..study.plot_gradients import plot_gradients
        logs, labels, title = _logs(args)
        plot_gradients(logs, out=args.out, title=title, labels=labels)
        return args.out
    return _guarded(draw)


def run_training(args):
    def draw():
        from ..study.plotting import plot_training
        if args.smooth is not None and args.smooth <= 0:
            raise ValueError(f"--smooth must be positive, got {args.smooth}")
        logs, labels, title = _logs(args)
        plot_training(logs, out=args.out, title=title, window=args.smooth, labels=labels)
        return args.out
    return _guarded(draw)
