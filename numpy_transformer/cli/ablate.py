"""``ablate``: the seed design's experiment. Train every variant on the same task, data, seed and
step budget, and compare what they reach.

  ablate --task shift --variants baseline,learned-pos,gelu --steps 600 [--repeats 3]

Every option of ``train`` (``--model``, ``--d-model``, ``--lr``, ...) sets the base configuration that
the variants change one thing of. The table: parameters, the final held-out loss, token and sequence
accuracy (gpt and seq2seq: exact match of the greedily generated sequence), the steps until the
held-out token accuracy first reached 99% at an evaluation (every ``--eval-every`` steps), and the
training wall time. ``--repeats K`` trains each variant with the seeds S, S+1, ..., S+K-1 (data,
initialisation and batch order all change with the seed) and reports mean ± standard deviation, so
that a difference can be told from noise. The PNG (``--out``, needs matplotlib) shows every variant's
held-out curves. ``--list`` prints the variants.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..study.ablation import VARIANTS, format_table, parse_variants, plot_ablation, run_ablation, runs_to_dict
from ..study.plotting import MatplotlibMissing
from ..utils.text import fit
from . import positive_int
from .train import add_config_options, given_options


def register(subparsers):
    p = subparsers.add_parser("ablate", help="train several variants on the same data, seed and budget; print "
                              "a table and draw their curves", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("ablation")
    g.add_argument("--variants", default="baseline,learned-pos,gelu,pre-ln",
                   help="comma-separated variant names (default baseline,learned-pos,gelu,pre-ln; --list shows all)")
    g.add_argument("--repeats", type=positive_int, default=1, help="seeds per variant (default 1)")
    g.add_argument("--eval-every", type=positive_int, default=100, help="held-out evaluation every N steps, the "
                   "curve's resolution and that of 'steps to 99%%' (default 100)")
    g.add_argument("--eval-examples", type=positive_int, default=500, help="held-out examples per curve point "
                   "(default 500; the final figures use the whole held-out set)")
    g.add_argument("--out", default="ablation.png", help="PNG of the curves (default ablation.png)")
    g.add_argument("--no-plot", action="store_true", help="draw no PNG")
    g.add_argument("--json", metavar="PATH", help="also write every run's curve and figures as JSON")
    g.add_argument("--list", action="store_true", help="list the variants and exit")
    g.add_argument("--quiet", action="store_true", help="no progress lines (on stderr), only the table")
    add_config_options(p)
    p.set_defaults(func=run_ablate)


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def run_ablate(args):
    if args.list:
        width = max(len(n) for n in VARIANTS)
        for v in VARIANTS.values():
            change = ", ".join(f"{k}={val!r}" for k, val in v.overrides.items()) or "nothing"
            print(fit(f"{v.name.ljust(width)}  {v.description} ({change})", indent=" " * (width + 2)))
        return 0
    try:
        variants = parse_variants(args.variants)
        base = given_options(args)
        base.setdefault("steps", 1000)

        def on_eval(run, step):                  # progress, to stderr
            if not args.quiet:
                print(f"  {run.variant} (seed {run.seed}) step {step}: held-out loss {run.val_loss[-1]:.4f}, "
                      f"token acc {100 * run.val_token_accuracy[-1]:.2f}%", file=sys.stderr)

        print(fit(f"ablate: {len(variants)} variant(s) x {args.repeats} seed(s), {base['steps']} steps each"
                  f" (base: {', '.join(f'{k}={v}' for k, v in sorted(base.items())) or 'the train defaults'})"))
        runs = run_ablation(base, variants, repeats=args.repeats, eval_every=args.eval_every,
                            eval_examples=args.eval_examples, on_eval=on_eval)
    except (ValueError, TypeError) as exc:
        return _error(str(exc))
    print(format_table(runs, "exact" if base.get("model", "encoder") in ("seq2seq", "gpt") else "seq acc"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"base": base, "runs": runs_to_dict(runs)}, f, indent=1)
        print(f"runs written to {args.json}")
    if not args.no_plot:
        try:
            plot_ablation(runs, out=args.out, base=base)
            print(f"curves drawn in {args.out}")
        except MatplotlibMissing as exc:
            print(f"note: no picture: {exc}", file=sys.stderr)
    return 0
