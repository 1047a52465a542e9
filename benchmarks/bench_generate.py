"""Generation speed of ``nt.GPT`` with and without the KV cache, against its torch twin.

    python benchmarks/bench_generate.py                  # the table (a couple of minutes on 2 cores)
    python benchmarks/bench_generate.py --quick          # a smaller model, fewer runs
    python benchmarks/bench_generate.py --out r.json     # the results to r.json

Greedy decoding of ``--new`` tokens after a ``--prompt``-token prompt, batch 1 and 8, float32, a GPT of
4 layers, 4 heads, width 128 (feed-forward 512), vocabulary 256. Each side runs in processes of its
own (NumPy: ``nt.GPT.generate``; torch: :func:`reference_torch.models.gpt.greedy` on the twin built from the
same weights, ``torch.no_grad``), with each library's default threads (``--threads N``: N for both, set
for OpenBLAS, OpenMP, numpy-transformer's pool and torch; 1 suits a small model, whose decoding step
is a chain of tiny products where extra threads only add synchronisation), with the cache and
without it (the whole sequence re-run every step). The timing is benchmarks/harness.py's, as in
bench_layer.py: each side runs ``--rounds`` fresh processes, alternating with the other side's (so a
change of load on a shared machine hits both), each timing ``--repeats`` runs after a warm-up; each
number is the median of all those runs, in generated tokens per second (batch x new tokens /
seconds), the ratio NumPy over torch in tokens/s (above 1, NumPy is faster) with the range of the
per-round ratios, and cached over uncached. The results go to benchmarks/out/bench_generate.json
(untracked) unless ``--out`` names a path.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import harness  # noqa: E402

CONFIG = dict(vocab_size=256, block_size=256, n_layer=4, n_head=4, n_embd=128, n_inner=512, dtype="float32")
QUICK = dict(vocab_size=128, block_size=128, n_layer=2, n_head=2, n_embd=64, n_inner=256, dtype="float32")


def case_generate(side, config, batches, prompt, new, threads=None):
    """One side's steps, ``{f"{batch}/{cache}": generate}``, and (as the extra) the tokens each generates."""
    import numpy as np

    import numpy_transformer as nt
    model = nt.GPT(nt.GPTConfig(**config), seed=0).eval()
    if side == "torch":
        import torch

        from reference_torch.models import gpt as RG
        if threads:
            torch.set_num_threads(threads)
        twin = RG.to_torch(model).eval()

        def gen(ids, cache):
            return RG.greedy(twin, ids, new, use_cache=cache)
    else:
        def gen(ids, cache):
            return model.generate(ids, new, use_cache=cache)
    rng = np.random.default_rng(0)
    steps, tokens = {}, {}
    for b in batches:
        ids = rng.integers(0, config["vocab_size"], size=(b, prompt))
        for cache in (True, False):
            steps[f"{b}/{cache}"] = (lambda ids=ids, cache=cache: gen(ids, cache))
            tokens[f"{b}/{cache}"] = np.asarray(gen(ids, cache)).tolist()
    return steps, tokens


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smaller model and 2 repeats")
    ap.add_argument("--prompt", type=int, default=16, help="prompt length (default 16)")
    ap.add_argument("--new", type=int, default=112, help="tokens to generate (default 112)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per process and measurement (default 3)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="processes per side, alternating between the sides (default 3)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of each side: OpenBLAS, OpenMP, numpy_transformer's pool, torch (default: "
                         "each library's own default)")
    ap.add_argument("--out", default=os.path.join(harness.DEFAULT_OUT_DIR, "bench_generate.json"),
                    help="write the results as JSON to this path (default benchmarks/out/bench_generate.json, "
                         "untracked)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return harness.serve_child(args.child, {"generate": case_generate})
    config = QUICK if args.quick else CONFIG
    repeats = 2 if args.quick else args.repeats
    if args.rounds < 1 or repeats < 1:
        ap.error("--rounds and --repeats must be >= 1")
    if args.prompt < 1 or args.new < 1 or args.prompt + args.new > config["block_size"]:
        ap.error(f"--prompt and --new must be >= 1 with prompt + new <= block_size {config['block_size']}")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads must be >= 1, got {args.threads}")
    kw = dict(config=config, batches=[1, 8], prompt=args.prompt, new=args.new, threads=args.threads)
    env = None
    if args.threads:                 # the same thread count on both sides: BLAS, OpenMP, our pool, torch
        n = str(args.threads)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, NT_NUM_THREADS=n)
    res = harness.compare(os.path.abspath(__file__), "generate", kw, rounds=args.rounds, warmup=1,
                          repeats=repeats, env=env)
    results = {side: {"seconds": {k: v["median_ms"] / 1e3 for k, v in res["sides"][side].items()},
                      "tokens": res["extra"][side]} for side in ("numpy", "torch")}
    print(f"nt.GPT greedy generation, {config['n_layer']} layers, width {config['n_embd']}, V {config['vocab_size']}, "
          f"{config['dtype']}; prompt {args.prompt}, {args.new} new tokens; medians of {args.rounds} x {repeats} runs; "
          f"threads {args.threads or 'default'}; {harness.load_text(res)}")
    head = (f"{'batch':>5} {'cache':>6} | {'numpy tok/s':>11} {'torch tok/s':>11} {'np/torch [range]':>20} "
            f"| same tokens")
    print(head + "\n" + "-" * len(head))
    rows = []
    for b in kw["batches"]:
        for cache in (True, False):
            key = f"{b}/{cache}"
            tps = {n: b * args.new / results[n]["seconds"][key] for n in results}
            same = results["numpy"]["tokens"][key] == results["torch"]["tokens"][key]
            r = res["ratio"][key]                       # time ratio numpy / torch; tokens/s is its inverse
            ratio, low, high = 1 / r["median"], 1 / r["high"], 1 / r["low"]
            rows.append(dict(batch=b, cache=cache, numpy_tokens_per_s=tps["numpy"], torch_tokens_per_s=tps["torch"],
                             ratio=ratio, ratio_range=[low, high], same_tokens=same))
            print(f"{b:>5} {str(cache):>6} | {tps['numpy']:>11.1f} {tps['torch']:>11.1f} {ratio:>8.2f} "
                  f"[{low:.2f}-{high:.2f}] | {'yes' if same else 'no'}")
    for b in kw["batches"]:
        c = {r["cache"]: r for r in rows if r["batch"] == b}
        speedup = {n: c[True][f"{n}_tokens_per_s"] / c[False][f"{n}_tokens_per_s"] for n in ("numpy", "torch")}
        print(f"batch {b}: the cache speeds NumPy up {speedup['numpy']:.2f}x, torch {speedup['torch']:.2f}x")
    import numpy
    import torch
    meta = dict(machine=platform.machine(), cores=os.cpu_count(), python=platform.python_version(),
                numpy=numpy.__version__, torch=torch.__version__, config=config, prompt=args.prompt, new=args.new,
                repeats=repeats, rounds=args.rounds, load=res["load"], threads=args.threads,
                date=time.strftime("%Y-%m-%d"))
    print(f"wrote {harness.write_json(args.out, {'meta': meta, 'rows': rows})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
