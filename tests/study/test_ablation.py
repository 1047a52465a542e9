"""``ablate``: every variant trains on the same data, seed and budget; the table and the picture."""

import json
import re

import numpy as np
import pytest

from numpy_transformer.cli import build_parser
from numpy_transformer.study import ablation
from numpy_transformer.study.ablation import Variant, VariantRun, format_table, parse_variants, run_ablation, summarize

TINY = dict(task="shift", d_model=16, nhead=2, dim_feedforward=32, num_layers=1, num_train=200, num_val=40,
            vocab_size=12, seq_len=6, batch_size=8, steps=6, warmup=2)


def test_parse_variants_names_the_option():
    assert [v.name for v in parse_variants("baseline, gelu")] == ["baseline", "gelu"]
    with pytest.raises(ValueError, match=r"--variants: unknown variant\(s\) nope; known: baseline"):
        parse_variants("baseline,nope")
    with pytest.raises(ValueError, match="--variants: gelu given more than once"):
        parse_variants("gelu,gelu")
    with pytest.raises(ValueError, match="at least one"):
        parse_variants(" , ")


def test_every_variant_changes_only_its_fields():
    for v in ablation.VARIANTS.values():
        assert set(v.overrides) <= set(ablation.TrainConfig.__dataclass_fields__), v.name
    assert ablation.VARIANTS["baseline"].overrides == {}


def test_variants_share_data_and_batches(monkeypatch):
    """The same data and batch order for every variant of one repeat; the seed moves with the repeat."""
    seen = []
    real = ablation.Trainer

    def spy(config):
        t = real(config)
        seen.append((config.seed, config.activation, t.data.train_src.copy(), t.batcher.next()[0].copy()))
        return real(config)             # a fresh trainer (the spy consumed one batch of its own copy)

    monkeypatch.setattr(ablation, "Trainer", spy)
    runs = run_ablation(TINY, parse_variants("baseline,gelu"), repeats=2, eval_every=3, eval_examples=10)
    assert [(r.variant, r.seed) for r in runs] == [("baseline", 0), ("gelu", 0), ("baseline", 1), ("gelu", 1)]
    by_seed = {}
    for seed, act, data, batch in seen:
        by_seed.setdefault(seed, []).append((act, data, batch))
    assert sorted(by_seed) == [0, 1]
    for group in by_seed.values():
        assert [a for a, _, _ in group] == ["relu", "gelu"]
        np.testing.assert_array_equal(group[0][1], group[1][1])
        np.testing.assert_array_equal(group[0][2], group[1][2])
    assert not np.array_equal(by_seed[0][0][1], by_seed[1][0][1])
    for r in runs:
        assert r.steps == [3, 6] and len(r.val_loss) == len(r.val_token_accuracy) == 2
        assert np.isfinite(r.loss) and 0 <= r.token_accuracy <= 1 and r.seconds > 0
    assert runs[0].parameters == runs[1].parameters                # relu -> gelu adds no parameter


def test_a_refused_variant_stops_before_any_training(monkeypatch):
    trained = []
    monkeypatch.setattr(ablation.Trainer, "train", lambda self, *a, **k: trained.append(1))
    bad = Variant("tanh", {"activation": "tanh"}, "not an option")
    with pytest.raises(ValueError, match=r"variant tanh: activation must be one of"):
        run_ablation(TINY, [ablation.VARIANTS["baseline"], bad])
    assert trained == []


def _run(name, seed, accs, loss, params=100, seconds=1.0):
    r = VariantRun(name, seed, params, steps=[100 * (i + 1) for i in range(len(accs))],
                   val_loss=[loss] * len(accs), val_token_accuracy=list(accs))
    r.loss, r.token_accuracy, r.sequence_accuracy, r.seconds = loss, accs[-1], accs[-1] / 2, seconds
    return r


def test_steps_to_99_and_the_table():
    a = _run("a", 0, [0.5, 0.995, 0.98], 0.1)
    assert a.steps_to(0.99) == 200 and a.steps_to(0.999) is None
    one = format_table([a, _run("b", 0, [0.2, 0.3, 0.4], 2.0)]).splitlines()
    assert one[0].split() == ["variant", "params", "val", "loss", "token", "acc", "%", "seq", "acc", "%",
                              "steps", "to", "99%", "train", "s"]
    assert one[2].split() == ["a", "100", "0.1000", "98.00", "49.00", "200", "1.0"]
    assert one[3].split()[-2:] == ["never", "1.0"]
    runs = [_run("a", 0, [0.99, 1.0], 0.1, seconds=1.0), _run("a", 1, [0.5, 0.6], 0.3, seconds=3.0),
            _run("a", 2, [0.2, 0.995], 0.2, seconds=2.0)]
    s, = summarize(runs)
    assert s.repeats == 3 and s.steps_to_99 == [100, None, 200]
    assert s.loss == pytest.approx((0.2, 0.1)) and s.seconds == pytest.approx((2.0, 1.0))
    row = format_table(runs).splitlines()[2]
    assert "0.2000 ± 0.1000" in row and "150 (2/3)" in row and "2.0 ± 1.0" in row


def test_cli_table_json_and_picture(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    args = ["ablate", "--variants", "baseline,learned-pos", "--eval-every", "3", "--eval-examples", "10",
            "--out", str(tmp_path / "a.png"), "--json", str(tmp_path / "a.json"), "--quiet"]
    for k, v in TINY.items():
        args += [f"--{k.replace('_', '-')}".replace("num-layers", "layers"), str(v)]
    ns = build_parser().parse_args(args)
    assert ns.func(ns) == 0
    out = capsys.readouterr().out
    assert "baseline" in out and "learned-pos" in out and "steps to 99%" in out
    assert (tmp_path / "a.png").stat().st_size > 10000
    saved = json.loads((tmp_path / "a.json").read_text())
    assert [r["variant"] for r in saved["runs"]] == ["baseline", "learned-pos"]
    assert saved["base"]["steps"] == 6 and saved["runs"][0]["steps"] == [3, 6]
    assert all(len(line) <= 100 for line in out.splitlines())


def test_cli_refusals_are_one_line(capsys):
    for argv, msg in ((["ablate", "--variants", "nope"], "--variants: unknown variant(s) nope"),
                      (["ablate", "--variants", "baseline", "--model", "gpt", "--task", "shift"],
                       "task must be one of")):
        ns = build_parser().parse_args(argv)
        assert ns.func(ns) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and msg in err and "\n" not in err


def test_list_shows_every_variant(capsys):
    ns = build_parser().parse_args(["ablate", "--list"])
    assert ns.func(ns) == 0
    out = capsys.readouterr().out
    for name in ablation.VARIANTS:
        assert name in out


@pytest.mark.slow
def test_the_readme_ablation_table_is_what_its_command_prints(capsys):
    """The README's measured shift ablation: its command, run, prints the figures of the README's table
    (all but the wall time) for every variant (8 variants x 3 seeds x 600 steps: minutes on 2 cores):
    the parameter counts exactly, each mean within its quoted spread, the steps to 99% (below)."""
    import _readme
    command = next(c for c in _readme.shell_commands() if c[3:4] == ["ablate"] and "--eval-every" in c)
    ns = build_parser(command[3:]).parse_args(command[3:] + ["--no-plot", "--quiet"])
    assert ns.func(ns) == 0
    printed = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(printed) if line.startswith("variant "))
    columns = re.split(r"\s{2,}", printed[start].strip())
    cells = (re.split(r"\s{2,}", line.strip()) for line in printed[start + 2:])
    measured = {r[0]: dict(zip(columns, r)) for r in cells if len(r) == len(columns)}
    quoted = _readme.table("variant | params")
    assert [q["variant"].split(" (")[0] for q in quoted] == list(measured) == ns.variants.split(",")
    for q in quoted:
        got = measured[q["variant"].split(" (")[0]]
        assert got["params"] == q["params"], (q["variant"], got["params"], q["params"])
        for column in ("val loss", "token acc %", "seq acc %"):
            assert within_spread(got[column], q[column]), (q["variant"], column, got[column], q[column])
        assert steps_agree(got["steps to 99%"], q["steps to 99%"]), (q["variant"], got["steps to 99%"],
                                                                      q["steps to 99%"])


def _mean_std(cell):
    mean, std = cell.split("±")
    decimals = len(mean.strip().partition(".")[2])
    return float(mean), float(std), 10.0 ** -decimals


def within_spread(measured, quoted):
    """A "mean ± std" over the seeds holds when the measured mean lies within the quoted spread: the
    larger of the two standard deviations, and at least one unit of the last digit printed. Results are
    not bit-identical across BLAS builds (summation order), so the last digit of a mean or a std over
    three seeds moves; a mean outside that band is a different result."""
    m, s, unit = _mean_std(measured)
    qm, qs, _ = _mean_std(quoted)
    return abs(m - qm) <= max(s, qs, unit) + 1e-12


def steps_agree(measured, quoted):
    """"400 (3/3)": the step at which the mean reaches 99% and how many seeds do. Where every seed or
    none reaches 99% the cell must match exactly; where only some do (a knife-edge, as the README says),
    the count must still be neither all nor none."""
    def parse(cell):
        m = re.fullmatch(r"(\d+|never) \((\d+)/(\d+)\)", cell.strip())
        assert m, cell
        return m.group(1), int(m.group(2)), int(m.group(3))
    step, k, n = parse(measured)
    q_step, q_k, q_n = parse(quoted)
    if q_k in (0, q_n):
        return (step, k, n) == (q_step, q_k, q_n)
    return n == q_n and 0 < k < n
