"""Generation speed of ``nt.GPT`` with and without the KV cache, against its torch twin.

    python benchmarks/bench_generate.py                  # the table (a couple of minutes on 2 cores)
    python benchmarks/bench_generate.py --quick          # a smaller model, fewer runs
    python benchmarks/bench_generate.py --out results_generate.json   # also write the results

Greedy decoding of ``--new`` tokens after a ``--prompt``-token prompt, batch 1 and 8, float32, a GPT of
4 layers, 4 heads, width 128 (feed-forward 512), vocabulary 256. Each side runs in processes of its
own (NumPy: ``nt.GPT.generate``; torch: :func:`reference_torch.gpt.greedy` on the twin built from the
same weights, ``torch.no_grad``), both with ``--threads`` threads (default 1: decoding a small model
is a long chain of tiny products, where extra threads only add synchronisation), with the cache and
without it (the whole sequence re-run every step). Each side runs ``--rounds`` fresh processes,
alternating with the other side's (so a change of load on a shared machine hits both), each timing
``--repeats`` runs after a warm-up; each number is the median of all those runs, in generated tokens
per second (batch x new tokens / seconds). The ratios are NumPy over torch (tokens/s: above 1, NumPy
is faster) and cached over uncached. Nothing is written unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONFIG = dict(vocab_size=256, block_size=256, n_layer=4, n_head=4, n_embd=128, n_inner=512, dtype="float32")
QUICK = dict(vocab_size=128, block_size=128, n_layer=2, n_head=2, n_embd=64, n_inner=256, dtype="float32")


def _measure(run, repeats):
    """``repeats`` timings (seconds) of ``run`` after one warm-up."""
    run()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return times


def _median(values):
    values = sorted(values)
    return values[len(values) // 2]


def side(name, config, batches, prompt, new, repeats, threads):
    """One side's measurements: ``{f"{batch}/{cache}": [seconds, ...]}`` and the generated tokens."""
    import numpy as np

    import numpy_transformer as nt
    model = nt.GPT(nt.GPTConfig(**config), seed=0).eval()
    if name == "torch":
        import torch

        from reference_torch import gpt as RG
        torch.set_num_threads(threads)
        twin = RG.to_torch(model).eval()

        def gen(ids, cache):
            return RG.greedy(twin, ids, new, use_cache=cache)
    else:
        def gen(ids, cache):
            return model.generate(ids, new, use_cache=cache)
    rng = np.random.default_rng(0)
    res, tokens = {}, {}
    for b in batches:
        ids = rng.integers(0, config["vocab_size"], size=(b, prompt))
        for cache in (True, False):
            res[f"{b}/{cache}"] = _measure(lambda: gen(ids, cache), repeats)
            tokens[f"{b}/{cache}"] = gen(ids, cache).tolist()
    return {"seconds": res, "tokens": tokens}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smaller model and 3 repeats")
    ap.add_argument("--prompt", type=int, default=16, help="prompt length (default 16)")
    ap.add_argument("--new", type=int, default=112, help="tokens to generate (default 112)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per process and measurement (default 3)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="processes per side, alternating between the sides (default 3)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of each side: OpenBLAS, OpenMP, numpy_transformer's pool, torch (default 1)")
    ap.add_argument("--out", help="write the results as JSON to this path")
    ap.add_argument("--side", choices=("numpy", "torch"), help=argparse.SUPPRESS)    # the child processes
    ap.add_argument("--child-args", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        kw = json.loads(args.child_args)
        print(json.dumps(side(args.side, **kw)))
        return 0
    config = QUICK if args.quick else CONFIG
    repeats = 2 if args.quick else args.repeats
    if args.rounds < 1 or repeats < 1:
        ap.error("--rounds and --repeats must be >= 1")
    if args.prompt < 1 or args.new < 1 or args.prompt + args.new > config["block_size"]:
        ap.error(f"--prompt and --new must be >= 1 with prompt + new <= block_size {config['block_size']}")
    kw = dict(config=config, batches=[1, 8], prompt=args.prompt, new=args.new, repeats=repeats, threads=args.threads)
    threads = str(args.threads)          # the same thread count on both sides: BLAS, OpenMP, our pool, torch
    env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads,
               NT_NUM_THREADS=threads)
    results = {}
    for r in range(args.rounds):     # each side in fresh processes of its own, alternating (A B B A ...)
        for name in (("numpy", "torch") if r % 2 == 0 else ("torch", "numpy")):
            out = subprocess.run([sys.executable, __file__, "--side", name, "--child-args", json.dumps(kw)],
                                 capture_output=True, text=True, check=True, cwd=ROOT, env=env)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            if name not in results:
                results[name] = got
            else:
                for key, times in got["seconds"].items():
                    results[name]["seconds"][key] += times
    for side_results in results.values():
        side_results["seconds"] = {k: _median(v) for k, v in side_results["seconds"].items()}
    print(f"nt.GPT greedy generation, {config['n_layer']} layers, width {config['n_embd']}, V {config['vocab_size']}, "
          f"{config['dtype']}; prompt {args.prompt}, {args.new} new tokens; medians of {args.rounds} x {repeats} runs")
    head = f"{'batch':>5} {'cache':>6} | {'numpy tok/s':>11} {'torch tok/s':>11} {'np/torch':>8} | same tokens"
    print(head + "\n" + "-" * len(head))
    rows = []
    for b in kw["batches"]:
        for cache in (True, False):
            key = f"{b}/{cache}"
            tps = {n: b * args.new / results[n]["seconds"][key] for n in results}
            same = results["numpy"]["tokens"][key] == results["torch"]["tokens"][key]
            ratio = tps["numpy"] / tps["torch"]
            rows.append(dict(batch=b, cache=cache, numpy_tokens_per_s=tps["numpy"], torch_tokens_per_s=tps["torch"],
                             ratio=ratio, same_tokens=same))
            print(f"{b:>5} {str(cache):>6} | {tps['numpy']:>11.1f} {tps['torch']:>11.1f} {ratio:>8.2f}"
                  f" | {'yes' if same else 'no'}")
    for b in kw["batches"]:
        c = {r["cache"]: r for r in rows if r["batch"] == b}
        speedup = {n: c[True][f"{n}_tokens_per_s"] / c[False][f"{n}_tokens_per_s"] for n in ("numpy", "torch")}
        print(f"batch {b}: the cache speeds NumPy up {speedup['numpy']:.2f}x, torch {speedup['torch']:.2f}x")
    if args.out:
        import numpy
        import torch
        meta = dict(machine=platform.machine(), python=platform.python_version(), numpy=numpy.__version__,
                    torch=torch.__version__, config=config, prompt=args.prompt, new=args.new, repeats=repeats,
                    rounds=args.rounds, load_average=os.getloadavg(),
                    threads=args.threads, date=time.strftime("%Y-%m-%d"))
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
