"""The README's ``train`` commands and the figures it quotes, read from the README itself.

The commands are parsed by the ``train`` command's own parser, so the slow tests that check the figures
train exactly what a reader's copy-paste runs; the figures are read from the tables, so a test checks
the number printed there and no copy of it.

A ```bash block is read as a shell would read it, as far as the README needs: ``\\`` continues a line,
``#`` starts a comment, ``NAME="..."`` assigns a variable and ``$NAME`` expands it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import NamedTuple

from numpy_transformer.cli import build_parser
from numpy_transformer.cli.train import given_options
from numpy_transformer.training.trainer import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PREFIX = ["python", "-m", "numpy_transformer"]


def shell_commands(path: Path = README) -> list[list[str]]:
    """Every command of the ```bash blocks of ``path``, variables expanded, as argv lists."""
    text = path.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        variables: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            assign = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", words[0])
            if assign and len(words) == 1:
                variables[assign.group(1)] = assign.group(2)
                continue
            line = re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", lambda m: variables[m.group(1)], line)
            commands.append(shlex.split(line, comments=True))
    return commands


def run_script_commands(cwd: Path, path: Path = README) -> list[list[str]]:
    """Run, in ``cwd``, every ``python scripts/...`` command of the ```bash blocks of ``path`` as written
    (``python`` the running interpreter, the script the checkout's); each must succeed. Returns them."""
    import subprocess
    import sys
    commands = [argv for argv in shell_commands(path) if argv[:1] == ["python"] and argv[1:2]
                and argv[1].startswith("scripts/")]
    for argv in commands:
        script = ROOT / argv[1]
        if not script.is_file():
            raise LookupError(f"{path.name}: the command {' '.join(argv)!r} names {argv[1]}, which does not exist")
        proc = subprocess.run([sys.executable, str(script), *argv[2:]], cwd=cwd, capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            raise AssertionError(f"{path.name}: {' '.join(argv)!r} failed ({proc.returncode}): {proc.stderr}")
    return commands


def train_command(*options: str, path: Path = README) -> list[str]:
    """The one ``python -m numpy_transformer train ...`` command of ``path`` that holds every option and
    value of ``options`` (pairs: ``"--model", "seq2seq"``), as its argv after ``python -m numpy_transformer``."""
    wanted = list(zip(options[::2], options[1::2]))
    found = [argv[3:] for argv in shell_commands(path)
             if argv[:4] == PREFIX + ["train"] and all(p in zip(argv, argv[1:]) for p in wanted)]
    if len(found) != 1:
        raise LookupError(f"{path.name}: expected one train command with {list(options)}, found {len(found)}")
    return found[0]


def table(header: str, path: Path = README) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header row starts with ``| header``, as {column: cell}."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(f"| {header}")]
    if len(starts) != 1:
        raise LookupError(f"{path.name}: expected one table headed {header!r}, found {len(starts)}")
    rows = []
    for line in lines[starts[0]:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    columns, body = rows[0], rows[2:]                        # rows[1] is the |---| rule
    return [dict(zip(columns, r)) for r in body]


def row(header: str, first_cell: str, path: Path = README) -> dict[str, str]:
    """The row of :func:`table` ``header`` whose first cell starts with ``first_cell``."""
    found = [r for r in table(header, path) if next(iter(r.values())).startswith(first_cell)]
    if len(found) != 1:
        raise LookupError(f"{path.name}: expected one row {first_cell!r} in the table {header!r}, found {len(found)}")
    return found[0]


_NUMBER = r"(\d+(?:\.(\d+))?)"
_INTERVAL = rf"{_NUMBER}(?:\s*[–-]\s*{_NUMBER})?"


class Quoted(NamedTuple):
    """A quoted figure as the interval it claims, and the decimals it is printed with."""
    lo: float
    hi: float
    decimals: int

    def holds(self, measured: float) -> bool:
        return self.lo <= round(measured, self.decimals) <= self.hi


def _interval(text: str) -> Quoted:
    m = re.match(rf"\s*{_INTERVAL}", text)
    if not m:
        raise ValueError(f"no figure in {text!r}")
    lo, hi = m.group(1), m.group(3) or m.group(1)
    return Quoted(float(lo), float(hi), max(len(m.group(2) or ""), len(m.group(4) or m.group(2) or "")))


def quoted(cell: str) -> Quoted:
    """The figure a cell quotes: ``**99.90%** (...)`` -> 99.90 (2 decimals), ``**99.70–99.72%**`` ->
    [99.70, 99.72]; the bold figure if there is one, else the cell's first number."""
    bold = re.search(r"\*\*(.*?)\*\*", cell)
    return _interval(bold.group(1) if bold else cell)


def milestones(cell: str, steps: int, every: int) -> dict[int, Quoted]:
    """Every step at which a cell quotes a figure: its bold figure at the last step ``steps``, and what
    its parenthesis adds (parts separated by ``;``): ``(98.9% at step 1000)``, ``(already at step 500)``
    (the bold figure then),
    ``(from step 400 on)`` (the bold figure at every evaluation, each ``every`` steps, from 400 on)."""
    final = quoted(cell)
    out = {steps: final}
    for m in re.finditer(rf"[(;]\s*({_INTERVAL})% at step (\d+)\s*[;)]", cell):
        out[int(m.group(6))] = _interval(m.group(1))
    for m in re.finditer(r"already at step (\d+)", cell):
        out[int(m.group(1))] = final
    for m in re.finditer(r"from step (\d+) on", cell):
        out.update({s: final for s in range(int(m.group(1)), steps + 1, every)})
    return dict(sorted(out.items()))


def over_seeds(cell: str) -> tuple[list[int], Quoted] | None:
    """What a cell claims of other seeds than the command's: ``**99.6–100.00%** over seeds 0–4`` (the
    bold figure, for each of them) or ``(99.6–100.00% over seeds 0–4)`` -> ([0, 1, 2, 3, 4], that
    interval); None when it claims nothing."""
    m = (re.search(r"\*\*([^*%]*)%\*\* over seeds (\d+)[–-](\d+)", cell)
         or re.search(r"[(;]\s*([^();%]*)% over seeds (\d+)[–-](\d+)\s*[;)]", cell))
    if m is None:
        return None
    return list(range(int(m.group(2)), int(m.group(3)) + 1)), _interval(m.group(1))


def evaluations(trainer, at_steps) -> dict:
    """Train ``trainer`` through each step of ``at_steps`` (ascending) and evaluate it there (held out);
    evaluating changes no generator, so the run is the uninterrupted one."""
    out = {}
    for step in at_steps:
        trainer.train(steps=step)
        out[step] = trainer.evaluate()
    return out


def config_of(argv: list[str], **replace: object) -> TrainConfig:
    """The :class:`TrainConfig` the ``train`` command ``argv`` runs, as ``run_train`` builds it; options
    in ``replace`` (CLI spelling without the dashes, ``task="sort"``) are set as ``--task sort`` would."""
    argv = list(argv)
    for name, value in replace.items():
        flag = "--" + name.replace("_", "-")
        if flag in argv:
            argv[argv.index(flag) + 1] = str(value)
        else:
            argv += [flag, str(value)]
    args = build_parser(argv).parse_args(argv)
    return TrainConfig(**given_options(args))
