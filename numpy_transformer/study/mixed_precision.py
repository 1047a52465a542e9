"""Why the seed design keeps LayerNorm in float32: the shift task trained three ways, and where float16
breaks a LayerNorm and the gradients. ``python -m numpy_transformer.study.mixed_precision --out DIR``
(docs/mixed-precision.md shows its figures).

Three runs from the same initialisation and batches: ``float32``; ``mixed`` (float16 copy, float32
master weights, LayerNorm/softmax/loss in float32, :class:`GradScaler`); ``mixed-f16-norm`` (the same
with the copy's LayerNorms in float16). Two probes: :func:`layer_norm_error_vs_scale` (a float16 and a
float32 ``layer_norm_forward`` against float64 as the input's scale sweeps float16's range) and
:func:`gradient_underflow` (the first step's gradients in float16 with and without loss scaling).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from .. import functional as F
from ..amp.grad_scaler import GradScaler
from ..amp.mixed import MixedPrecision
from ..models.encoder import TransformerModel
from ..nn.loss import CrossEntropyLoss
from ..nn.norms import LayerNorm
from ..optim import Adam, clip_grad_norm_
from ..tasks.data import Batcher, make_task

MODES = ("float32", "mixed", "mixed-f16-norm")
F16_TINY = float(np.finfo(np.float16).tiny)            # 6.1e-5, the smallest normal float16
F16_SUB = float(np.finfo(np.float16).smallest_subnormal)  # 6.0e-8; half of it and below round to 0
F16_MAX = float(np.finfo(np.float16).max)              # 65504


def _norm_input_recorder(model, log):
    """Record max |x - mean| and the smallest variance entering each LayerNorm (instance-level wrap)."""
    for name, m in model.named_modules():
        if isinstance(m, LayerNorm):
            def forward(x, _m=m, _name=name, _forward=m.forward):
                xc = x.astype(np.float64) - x.mean(axis=-1, keepdims=True)
                entry = log.setdefault(_name, [0.0, np.inf])
                entry[0] = max(entry[0], float(np.abs(xc).max()))
                entry[1] = min(entry[1], float((xc * xc).mean(axis=-1).min()))
                return _forward(x)
            object.__setattr__(m, "forward", forward)


def train(mode, steps=300, seed=0, d_model=32, nhead=2, num_layers=2, dim_feedforward=64, vocab_size=16,
          seq_len=8, batch_size=32, lr=1e-3, norm_first=False):
    """Train the shift task one of :data:`MODES`; the per-step loss, the scale and skipped steps, the
    held-out token accuracy, wall time, and (float32 master) the range of every LayerNorm's input."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    data = make_task("shift", vocab_size=vocab_size, seq_len=seq_len, num_train=2000, num_val=256, seed=seed)
    model = TransformerModel(vocab_size, d_model=d_model, nhead=nhead, num_layers=num_layers,
                             dim_feedforward=dim_feedforward, dropout=0.0, norm_first=norm_first, seed=seed)
    run = model if mode == "float32" else MixedPrecision(model, np.float16 if mode == "mixed-f16-norm" else np.float32)
    opt = Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scaler = GradScaler(enabled=mode != "float32")
    crit = CrossEntropyLoss()
    batcher = Batcher(data.train_src, data.train_tgt, batch_size, seed=seed)
    losses, scales, skipped = [], [], []
    t0 = time.perf_counter()
    for _ in range(steps):
        src, tgt = batcher.next()
        logits = run(src)                                                      # (B, S, V) float32
        loss = crit(logits.reshape(-1, vocab_size), tgt.reshape(-1))
        run.backward(scaler.scale(crit.backward().reshape(logits.shape)))
        scaler.unscale_(opt)
        clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scales.append(scaler.get_scale())
        scaler.update()
        skipped.append(scaler.get_scale() < scales[-1])        # a backoff: this step had inf/NaN, skipped
        opt.zero_grad()
        losses.append(float(loss))
    seconds = time.perf_counter() - t0
    run.eval()
    pred = run(data.val_src).argmax(-1)
    acc = float((pred == data.val_tgt).mean())
    norm_inputs = {}
    _norm_input_recorder(model, norm_inputs)
    model.eval()(data.val_src)
    return {"mode": mode, "model": model, "data": data, "loss": losses, "scale": scales,
            "skipped": int(np.sum(skipped)),
            "val_accuracy": acc, "seconds": seconds, "final_loss": float(np.mean(losses[-20:])),
            "norm_inputs": {k: {"max_abs_centred": v[0], "min_variance": v[1]} for k, v in norm_inputs.items()}}


def layer_norm_error_vs_scale(scales=None, d=64, rows=512, seed=0, eps=1e-5):
    """Max relative error of ``layer_norm_forward`` in float16 and float32 against float64 on inputs
    ``scale * N(0, 1)``; and, per scale, the fraction of float16 squares ``(x - mean)**2`` that
    overflow to inf or flush to zero."""
    scales = np.logspace(-5, 3.5, 35) if scales is None else np.asarray(scales, float)
    z = np.random.default_rng(seed).standard_normal((rows, d))
    out = {"scale": scales.tolist(), "float16": [], "float32": [], "sq_overflow": [], "sq_underflow": []}
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        for s in scales:
            x64 = z * s
            ref, _ = F.layer_norm_forward(x64, eps=eps)
            for name, dt in (("float16", np.float16), ("float32", np.float32)):
                y, _ = F.layer_norm_forward(x64.astype(dt), eps=eps)
                err = np.abs(y.astype(np.float64) - ref)
                out[name].append(float(np.nanmax(np.where(np.isfinite(err), err, np.inf)) / np.abs(ref).max()))
            x16 = x64.astype(np.float16)
            xc = x16 - x16.mean(axis=-1, keepdims=True)
            sq = xc * xc
            out["sq_overflow"].append(float(np.isinf(sq).mean()))
            out["sq_underflow"].append(float(((sq == 0) & (xc != 0)).mean()))
    return out


def gradient_underflow(model, src, tgt, init_scale=2.0 ** 16):
    """One backward of ``model`` (float32) on a batch, in float32 and in float16 with and without loss
    scaling. Returns the float32 loss gradient's and parameter gradients' magnitudes and, per float16
    run, the fraction of the loss gradient's nonzero entries that float16 flushes to 0 or holds as a
    subnormal (fewer than 10 significant bits), and the normwise error of the parameter gradients."""
    vocab = model.config["vocab_size"]
    crit = CrossEntropyLoss()
    model.eval()
    model.zero_grad()
    logits = model(src)
    crit(logits.reshape(-1, vocab), tgt.reshape(-1))
    d32 = crit.backward().reshape(logits.shape)
    model.backward(d32)
    g32 = np.concatenate([p.grad.ravel() for p in model.parameters()])
    result = {"abs_dlogits": np.abs(d32[d32 != 0]), "abs_float32": np.abs(g32)}
    mp = MixedPrecision(model).eval()
    for name, scale in (("unscaled", 1.0), ("scaled", init_scale)):
        model.zero_grad()
        mp(src)
        d = d32 * np.float32(scale)
        with np.errstate(under="ignore", over="ignore"):
            d16 = d.astype(np.float16)
        mp.backward(d)
        g16 = np.concatenate([p.grad.ravel() for p in model.parameters()]) / np.float32(scale)
        nz = d32 != 0
        result[name] = {"scale": scale,
                        "dlogits_flushed": float(((d16 == 0) & nz).sum() / nz.sum()),
                        "dlogits_subnormal": float(((np.abs(d16) < F16_TINY) & (d16 != 0)).sum() / nz.sum()),
                        "grad_error": float(np.linalg.norm(g16 - g32) / np.linalg.norm(g32)),
                        "finite": bool(np.isfinite(g16).all())}
    model.zero_grad()
    return result


def plot(runs, sweep, grads, out=None, ax=None, fig=None):
    """Three panels: the training losses; LayerNorm's error vs input scale; the first step's gradients
    against float16's range. ``ax``: three Axes (default a new Figure; ``fig``: a Figure to add them
    to); ``out``: a file to write, nothing written without it. Returns the Figure."""
    from .figures import finish, panels
    fig, (ax1, ax2, ax3) = panels(3, ax, fig, figsize=(15, 4.4), ncols=3, what="losses, LayerNorm, gradients")
    for r in runs:
        ax1.plot(r["loss"], label=f"{r['mode']} (acc {r['val_accuracy']:.3f}, {r['skipped']} skipped)")
    peak = max(v["max_abs_centred"] for r in runs for v in r["norm_inputs"].values())
    ax1.set(xlabel="step", ylabel="training loss", yscale="log",
            title=f"shift task, three ways (LayerNorm inputs: max |x - mean| = {peak:.3g})")
    ax1.title.set_fontsize(9)
    ax1.legend(fontsize=8)
    ax2.loglog(sweep["scale"], sweep["float16"], "o-", ms=3, label="LayerNorm in float16")
    ax2.loglog(sweep["scale"], sweep["float32"], "s-", ms=3, label="LayerNorm in float32")
    ax2b = ax2.twinx()
    ax2b.plot(sweep["scale"], sweep["sq_overflow"], "r:", label="float16 (x-mean)^2 = inf")
    ax2b.plot(sweep["scale"], sweep["sq_underflow"], "m:", label="float16 (x-mean)^2 flushed to 0")
    ax2b.set_ylabel("fraction of squares")
    ax2.text(0.02, 0.35,
             "float16 squares overflow (> 65504)\nonce |x - mean| > 256; eps = 1e-5 is\nbelow float16's normal range",
             transform=ax2.transAxes, fontsize=7)
    ax2.set(xlabel="input scale (std of x)", ylabel="max rel. error vs float64",
            title="where float16 breaks a LayerNorm")
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = ax2b.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center")
    g = grads["abs_dlogits"]
    ax3.hist(np.log10(g), bins=60, color="0.5", label="dloss/dlogits of the trained model")
    ax3.hist(np.log10(g * 2.0 ** 16), bins=60, alpha=0.5, label="x 2**16 (the loss scale)")
    for v, lab in ((F16_SUB, "float16 smallest subnormal"), (F16_TINY, "smallest normal"), (F16_MAX, "max")):
        ax3.axvline(np.log10(v), color="r", lw=0.8)
        ax3.text(np.log10(v), ax3.get_ylim()[1] * 0.6, lab, rotation=90, fontsize=7, va="top")
    u, sc = grads["unscaled"], grads["scaled"]
    ax3.set(xlabel="log10 |loss gradient| (float32)", ylabel="entries",
            title=f"loss gradient in float16: {u['dlogits_subnormal']:.0%} subnormal, "
                  f"{u['dlogits_flushed']:.1%} zero;\n"
                  f"parameter gradients' error {u['grad_error']:.2g} unscaled, {sc['grad_error']:.2g} scaled")
    ax3.title.set_fontsize(9)
    ax3.legend(fontsize=7)
    return finish(fig, out)


def main(argv=None):
    """The study's command line: train the three runs, probe, then write ``DIR/mixed_precision.json``
    first and ``DIR/mixed_precision.png`` after it, if matplotlib is installed (without it the figures'
    numbers are all in the JSON, and one line says how to get the picture). Returns the summary.
    Ctrl-C prints one line (what was written) and exits with status 130 (``SystemExit``)."""
    parser = argparse.ArgumentParser(prog="python -m numpy_transformer.study.mixed_precision",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="mixed-precision", help="directory for the figure and the JSON figures")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--norm-first", action="store_true", help="pre-LN instead of post-LN")
    args = parser.parse_args(argv)
    written = []
    try:
        return _study(args, written)
    except KeyboardInterrupt:
        said = f"{written[0]} is written, the figure is not" if written else "nothing written"
        print(f"interrupted; the study stopped ({said})", file=sys.stderr)
        raise SystemExit(130) from None


def _study(args, written):
    from .plotting import MatplotlibMissing
    runs = []
    for mode in MODES:
        print(f"training {mode} ({args.steps} steps) ...", file=sys.stderr)
        runs.append(train(mode, steps=args.steps, seed=args.seed, norm_first=args.norm_first))
    sweep = layer_norm_error_vs_scale()
    trained = runs[0]
    src, tgt = trained["data"].train_src[:256], trained["data"].train_tgt[:256]
    grads = gradient_underflow(trained["model"], src, tgt)
    os.makedirs(args.out, exist_ok=True)
    summary = {"runs": [{k: v for k, v in r.items() if k not in ("loss", "scale", "model", "data")} for r in runs],
               "layer_norm_sweep": sweep,
               "gradients": {k: v for k, v in grads.items() if k not in ("abs_float32", "abs_dlogits")}}
    json_path = os.path.join(args.out, "mixed_precision.json")
    with open(json_path, "w") as f:
        json.dump(summary, f, indent=1)
    written.append(json_path)
    for r in runs:
        print(f"{r['mode']:>15}: final loss {r['final_loss']:.4f}  val acc {r['val_accuracy']:.3f}  "
              f"skipped {r['skipped']}  final scale {r['scale'][-1]:g}  {r['seconds']:.1f} s")
    for k in ("unscaled", "scaled"):
        g = grads[k]
        print(f"trained model's loss gradient in float16, {k}: {g['dlogits_flushed']:.2%} flushed to 0, "
              f"{g['dlogits_subnormal']:.2%} subnormal; parameter gradients' normwise error {g['grad_error']:.2e}")
    print(f"wrote {json_path}")
    try:
        path = os.path.join(args.out, "mixed_precision.png")
        plot(runs, sweep, grads, out=path)
        print(f"wrote {path}")
    except MatplotlibMissing as exc:
        print(f"no figure: {exc}", file=sys.stderr)
    return summary


if __name__ == "__main__":
    main()
