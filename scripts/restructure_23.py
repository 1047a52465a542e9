#!/usr/bin/env python3
"""Issue 23, first phase: the package layout of ``numpy_transformer/``, one folder per layer.

Run from the checkout's root, on a clean tree::

    python scripts/restructure_23.py            # moves the files (git mv) and rewrites every reference
    python scripts/restructure_23.py --dry-run  # prints what it would do

What it does, in order:

1. ``git mv`` every module of :data:`MOVES` (old module -> new module; a package moves with all its
   submodules) and creates the new layer packages (:data:`NEW_PACKAGES`: a docstring and a lazy
   ``__getattr__`` for their submodules, so ``nt.models.gpt`` works as ``nt.nn`` does);
2. rewrites, from that one map, every reference to a moved module in ``numpy_transformer/``,
   ``reference_torch/``, ``tests/``, ``benchmarks/``, ``docs/``, ``README.md`` and ``DEVELOPERS.md``:
   imports (parsed with ``ast``, function-level ones too; a relative import stays relative, computed
   from the file's new place; ``from pkg import moved_submodule`` becomes
   ``from new_pkg import new_name as old_name``), dotted module paths in strings, comments and docs
   (``numpy_transformer.gpt.GPT``, ``python -m numpy_transformer.amp.study``), file paths
   (``numpy_transformer/loss.py``, ``../numpy_transformer/gradcheck/``), the attribute chains
   ``nt.<old module>.`` of tests and docs, and relative module strings (``"._trace"`` in the package's
   lazy-import table);
3. the edits the move needs that can be done from the code's structure (:func:`step_checkpoint_error`,
   :func:`step_evaluation`): they break the cycle ``checkpoint -> kinds -> training -> checkpoint``.

Idempotent: a move whose old file is gone counts as done, and only pending moves rewrite anything, so
a second run changes nothing. The rest of the first phase (the core's hooks, the package ``__init__``,
the layer test, the prose of DEVELOPERS.md) is a commit of hand edits replayed after this script
(``git cherry-pick``; see /work/notes/i23_plan.md).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys

PKG = "numpy_transformer"

#: old module -> new module. The one map every rewrite reads. A package (gradcheck, registry) moves
#: with its submodules; a module not listed stays where it is.
MOVES = {
    # utils/: the bottom layer, imports nothing of the package
    "numpy_transformer._checks": "numpy_transformer.utils.checks",
    "numpy_transformer._text": "numpy_transformer.utils.text",
    # nn/: the loss module beside the other modules
    "numpy_transformer.loss": "numpy_transformer.nn.loss",
    # models/: whole models
    "numpy_transformer.model": "numpy_transformer.models.encoder",
    "numpy_transformer.seq2seq_model": "numpy_transformer.models.seq2seq",
    "numpy_transformer.gpt": "numpy_transformer.models.gpt",
    "numpy_transformer.gpt_config": "numpy_transformer.models.gpt_config",
    "numpy_transformer.generation": "numpy_transformer.models.generation",
    # tasks/: seeded synthetic tasks, batching, metrics
    "numpy_transformer.data": "numpy_transformer.tasks.data",
    "numpy_transformer.tasks_lm": "numpy_transformer.tasks.lm",
    "numpy_transformer.tasks_seq2seq": "numpy_transformer.tasks.seq2seq",
    "numpy_transformer.bleu": "numpy_transformer.tasks.bleu",
    # training/: config, trainer, the model kinds, checkpoint format, run log, signals
    "numpy_transformer.training": "numpy_transformer.training.trainer",
    "numpy_transformer.train_config": "numpy_transformer.training.config",
    "numpy_transformer.kinds": "numpy_transformer.training.kinds",
    "numpy_transformer.checkpoint": "numpy_transformer.training.checkpoint",
    "numpy_transformer.checkpoint_files": "numpy_transformer.training.checkpoint_files",
    "numpy_transformer.checkpoint_validate": "numpy_transformer.training.checkpoint_validate",
    "numpy_transformer.runlog": "numpy_transformer.training.runlog",
    "numpy_transformer.interrupts": "numpy_transformer.training.interrupts",
    # study/: trace, gradcheck, attention maps, plots, ablation, the mixed-precision study
    "numpy_transformer._trace": "numpy_transformer.study.trace",
    "numpy_transformer._trace_grads": "numpy_transformer.study.trace_grads",
    "numpy_transformer.gradcheck": "numpy_transformer.study.gradcheck",
    "numpy_transformer.attention_maps": "numpy_transformer.study.attention_maps",
    "numpy_transformer.plotting": "numpy_transformer.study.plotting",
    "numpy_transformer.plot_gradients": "numpy_transformer.study.plot_gradients",
    "numpy_transformer.plot_positions": "numpy_transformer.study.plot_positions",
    "numpy_transformer.ablation": "numpy_transformer.study.ablation",
    "numpy_transformer.amp.study": "numpy_transformer.study.mixed_precision",
    # testing/: the case registry (tests, the gradcheck report, the checker, the drill oracle)
    "numpy_transformer.registry": "numpy_transformer.testing",
}

_LAZY = '''

def __getattr__(name):
    """The submodules, on first use (``nt.{short}.<submodule>``, as an eager import would give them)."""
    import importlib
    try:
        value = importlib.import_module(f".{{name}}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{{__name__}}.{{name}}":
            raise
        raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}") from None
    globals()[name] = value
    return value
'''

#: the new layer packages: their docstring (their ``__init__`` also gets the lazy ``__getattr__``)
NEW_PACKAGES = {
    "numpy_transformer.utils": "The bottom layer: argument validation (:mod:`.checks`) and text width and wrapping\n"
                               "(:mod:`.text`). Imports nothing of the package.",
    "numpy_transformer.models": "Whole models, each read top-down: the encoder (:mod:`.encoder`, ``TransformerModel``),\n"
                                "the encoder-decoder (:mod:`.seq2seq`, ``Seq2SeqModel``), GPT (:mod:`.gpt`, its\n"
                                "configuration in :mod:`.gpt_config`) and generation (:mod:`.generation`).\n"
                                "Built from :mod:`numpy_transformer.nn`; nothing here knows about tasks or training.",
    "numpy_transformer.tasks": "The seeded synthetic tasks and their batching (:mod:`.data`, :mod:`.lm`, :mod:`.seq2seq`)\n"
                               "and the metrics (:mod:`.bleu`).",
    "numpy_transformer.training": "Training: the configuration (``TrainConfig``), the :class:`~.trainer.Trainer`, the\n"
                                  "evaluation loop, the model kinds of ``--model`` (:mod:`.kinds`), the checkpoint\n"
                                  "format (:mod:`.checkpoint`, its files and validation), the run log (:mod:`.runlog`).",
    "numpy_transformer.study": "The study tools: the trace (:mod:`.trace`, subscribed to the hooks of\n"
                               ":mod:`numpy_transformer.nn.hooks`), the finite-difference gradient check\n"
                               "(:mod:`.gradcheck`), attention maps and plots, the ablation, the mixed-precision study.",
}

TEXT_ROOTS = ("numpy_transformer", "reference_torch", "tests", "benchmarks", "docs")
TEXT_FILES = ("README.md", "DEVELOPERS.md")
SELF = os.path.join("scripts", "restructure_23.py")

#: ``from numpy_transformer import gradcheck`` is the function (the package binds it), not the subpackage
ATTRIBUTE_NOT_MODULE = {"numpy_transformer.gradcheck"}
#: ``nt.<name>`` attributes that stay public under their old names (the package's alias table)
NT_ALIASES = {"gradcheck", "data", "generation", "tasks_seq2seq"}


# --------------------------------------------------------------------------------------------------
# the module tree
# --------------------------------------------------------------------------------------------------

def module_files():
    """``{module name: path}`` of every module of the packages, as the tree holds them now."""
    out = {}
    for pkg in (PKG, "reference_torch"):
        for root, dirs, files in os.walk(pkg):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for f in sorted(files):
                if f.endswith(".py"):
                    parts = os.path.join(root, f)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    out[".".join(parts)] = os.path.join(root, f)
    return out


def pending_moves(mods):
    """The moves still to do: those whose old module exists (a done move's old file is gone)."""
    out = {}
    for old, new in MOVES.items():
        if old in mods and not (old == "numpy_transformer.training" and mods[old].endswith("__init__.py")):
            out[old] = new
    return out


def mapped(name, moves):
    """``name`` (a module or ``module.attr...``) with its longest moved prefix replaced, or None."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in moves:
            return ".".join([moves[head]] + parts[i:])
    return None


def new_module_name(mod, moves):
    return mapped(mod, moves) or mod


def module_path(mod, is_pkg):
    base = mod.replace(".", os.sep)
    return os.path.join(base, "__init__.py") if is_pkg else base + ".py"


# --------------------------------------------------------------------------------------------------
# rewriting one file
# --------------------------------------------------------------------------------------------------

def _package_of(mod, is_pkg):
    return mod if is_pkg else mod.rsplit(".", 1)[0]


def _absolute(mod, is_pkg, level, module):
    base = _package_of(mod, is_pkg).split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _relative(from_mod, from_is_pkg, target):
    """The relative spelling of ``target`` from module ``from_mod`` (``..study``, ``.``, ``.trace``)."""
    pkg = _package_of(from_mod, from_is_pkg).split(".")
    t = target.split(".")
    k = 0
    while k < min(len(pkg), len(t)) and pkg[k] == t[k]:
        k += 1
    return "." * (len(pkg) - k + 1) + ".".join(t[k:])


def _line_offsets(text):
    offs, n = [0], 0
    for line in text.splitlines(keepends=True):
        n += len(line)
        offs.append(n)
    return offs


def _span(offs, node):
    return offs[node.lineno - 1] + node.col_offset, offs[node.end_lineno - 1] + node.end_col_offset


def _alias(name, asname):
    return name if not asname or asname == name else f"{name} as {asname}"


def _emit_from(spec, names, indent):
    line = f"from {spec} import {', '.join(names)}"
    if len(indent) + len(line) <= 110:
        return line
    out, cur = [], f"from {spec} import ("
    for i, n in enumerate(names):
        piece = n + (", " if i < len(names) - 1 else ")")
        if len(indent) + len(cur) + len(piece.rstrip()) > 110 and cur.strip():
            out.append(cur.rstrip())
            cur = " " * len(f"from {spec} import (")
        cur += piece
    out.append(cur)
    return ("\n" + indent).join(out)


def rewrite_imports(text, mod, is_pkg, new_mod, mods, moves):
    """``[(start, end, new text)]`` for the import statements of ``text`` that must change."""
    tree = ast.parse(text)
    offs = _line_offsets(text)
    moved_file = new_mod != mod
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names, changed = [], False
            for a in node.names:
                new = mapped(a.name, moves) if a.name.split(".")[0] == PKG else None
                changed |= new is not None
                names.append(_alias(new or a.name, a.asname))
            if changed:
                edits.append((*_span(offs, node), "import " + ", ".join(names)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if mod is None:
                    continue
                base = _absolute(mod, is_pkg, node.level, node.module)
            else:
                base = node.module or ""
            if base.split(".")[0] != PKG:
                continue
            groups = {}                    # new from-module -> [alias text]
            changed = False
            for a in node.names:
                full = f"{base}.{a.name}"
                if a.name != "*" and full in mods and full not in ATTRIBUTE_NOT_MODULE and mapped(full, moves):
                    target = mapped(full, moves)          # a moved submodule imported by name
                    parent, last = target.rsplit(".", 1)
                    groups.setdefault(parent, []).append(_alias(last, a.asname or a.name))
                    changed = True
                else:
                    new_base = mapped(base, moves)
                    changed |= new_base is not None
                    groups.setdefault(new_base or base, []).append(_alias(a.name, a.asname))
            if not changed and not (moved_file and node.level):
                continue
            start, end = _span(offs, node)
            indent = text[offs[node.lineno - 1]:start]
            indent = indent if not indent.strip() else ""
            specs = [(_relative(new_mod, is_pkg, g) if node.level else g, names) for g, names in groups.items()]
            seg = text[start:end]
            m = re.match(r"from\s+(\S+)\s+import", seg)
            if len(specs) == 1 and m and [n for n in specs[0][1]] == [_alias(a.name, a.asname) for a in node.names]:
                new_seg = seg[:m.start(1)] + specs[0][0] + seg[m.end(1):]     # keep the names' formatting
                delta = len(specs[0][0]) - len(m.group(1))
                if "\n" in new_seg and delta:                 # continuation lines aligned to the "("
                    head, *rest = new_seg.split("\n")
                    col = len(indent) + head.find("(") + 1 - delta
                    rest = [(" " * (col + delta) + r.lstrip()) if len(r) - len(r.lstrip()) == col else r
                            for r in rest]
                    new_seg = "\n".join([head, *rest])
            else:
                new_seg = ("\n" + indent).join(_emit_from(s, n, indent) for s, n in specs)
            if new_seg != seg:
                edits.append((start, end, new_seg))
    return edits, tree


def rewrite_relative_strings(tree, text, mod, is_pkg, new_mod, mods, moves):
    """Relative module names in string constants (the package's lazy table: ``"._trace"``)."""
    if mod is None:
        return []
    offs = _line_offsets(text)
    edits = []
    in_fstring = {id(c) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for c in ast.walk(n)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_fstring
                and re.fullmatch(r"\.+[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", node.value)):
            level = len(node.value) - len(node.value.lstrip("."))
            target = _absolute(mod, is_pkg, level, node.value.lstrip("."))
            new = mapped(target, moves) if target in mods else None
            if new:
                start, end = _span(offs, node)
                quote = text[start]
                edits.append((start, end, quote + _relative(new_mod, is_pkg, new) + quote))
    return edits


_DOTTED = re.compile(r"(?<![\w.])numpy_transformer((?:\.\w+)+)")
_PATH = re.compile(r"(?<![\w.])numpy_transformer/((?:\w+/)*\w+(?:\.py)?/?)")
_NT_ATTR = re.compile(r"(?<![\w.])nt\.(\w+)(?:\.(\w+))?")


def rewrite_names(text, moves, mods, protected):
    """Dotted paths, file paths and ``nt.<module>`` chains outside the ``protected`` spans."""
    edits = []

    def free(s, e):
        return not any(ps < e and s < pe for ps, pe, _ in protected)

    for m in _DOTTED.finditer(text):
        new = mapped(m.group(0), moves)
        if new and free(m.start(), m.end()):
            edits.append((m.start(), m.end(), new))
    for m in _PATH.finditer(text):
        rel = m.group(1)
        trail = "/" if rel.endswith("/") else ""
        core = rel.rstrip("/")
        is_py = core.endswith(".py")
        dotted = PKG + "." + (core[:-3] if is_py else core).replace("/", ".")
        new = mapped(dotted, moves)
        if new and free(m.start(), m.end()):
            if is_py:
                path = new.replace(".", "/") + ".py"
            else:
                path = new.replace(".", "/")
            edits.append((m.start(), m.end(), path + trail))
    for m in _NT_ATTR.finditer(text):
        first, second = m.group(1), m.group(2)
        if first in NT_ALIASES:
            continue
        if second and f"{PKG}.{first}.{second}" in moves:        # nt.amp.study
            new = moves[f"{PKG}.{first}.{second}"]
            end = m.end(2)
        elif f"{PKG}.{first}" in moves:
            new = moves[f"{PKG}.{first}"]
            end = m.end(1)
        else:
            continue
        if free(m.start(), end):
            edits.append((m.start(), end, "nt." + new[len(PKG) + 1:]))
    return edits


def apply_edits(text, edits):
    edits = sorted(edits)
    out, pos = [], 0
    for s, e, new in edits:
        if s < pos:                # overlapping: the first (outer) one wins
            continue
        out.append(text[pos:s])
        out.append(new)
        pos = e
    out.append(text[pos:])
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------------

def text_files():
    files = []
    for root in TEXT_ROOTS:
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith((".", "__pycache__", "out")))
            for n in sorted(names):
                if n.endswith((".py", ".md", ".txt", ".rst", ".cfg", ".toml")):
                    files.append(os.path.join(d, n))
    files += [f for f in TEXT_FILES if os.path.exists(f)]
    return [f for f in files if os.path.normpath(f) != SELF]


def git(*args, dry=False):
    if dry:
        print("git", *args)
        return
    subprocess.run(["git", *args], check=True)


def plan(moves, mods):
    """``[(old path, new path)]`` of every file that moves."""
    out = []
    for mod, path in sorted(mods.items()):
        new = mapped(mod, moves)
        if new:
            out.append((path, module_path(new, path.endswith("__init__.py"))))
    return out


def run(dry=False):
    mods = module_files()
    moves = pending_moves(mods)
    if not moves:
        print("restructure_23: nothing to move (already done)")
    path_to_mod = {p: m for m, p in mods.items()}
    files_moving = dict(plan(moves, mods))

    # 1. every new text, computed on the old layout
    new_texts = {}
    for path in text_files():
        text = open(path, encoding="utf-8").read()
        edits = []
        if path.endswith(".py"):
            mod = path_to_mod.get(path)
            is_pkg = path.endswith("__init__.py")
            new_mod = new_module_name(mod, moves) if mod else None
            try:
                ed, tree = rewrite_imports(text, mod, is_pkg, new_mod, mods, moves)
            except SyntaxError:
                ed, tree = [], None
            edits += ed
            if tree is not None and mod and mod.startswith(PKG):
                edits += rewrite_relative_strings(tree, text, mod, is_pkg, new_mod, mods, moves)
        edits += rewrite_names(text, moves, mods, edits)
        if edits:
            new = apply_edits(text, edits)
            if new != text:
                new_texts[files_moving.get(path, path)] = new

    # 2. the moves
    for old, new in sorted(files_moving.items()):
        d = os.path.dirname(new)
        if not dry:
            os.makedirs(d, exist_ok=True)
        git("mv", old, new, dry=dry)
    for pkg, doc in NEW_PACKAGES.items():
        init = module_path(pkg, True)
        if os.path.exists(init) or not any(m.startswith(pkg + ".") for m in moves.values()):
            continue
        short = pkg.rsplit(".", 1)[1]
        body = f'"""{doc}\n"""\n' + _LAZY.format(short=short)
        if dry:
            print("create", init)
        else:
            os.makedirs(os.path.dirname(init), exist_ok=True)
            with open(init, "w", encoding="utf-8") as f:
                f.write(body)
            git("add", init)

    # 3. the rewritten texts, at their new places
    for path, text in sorted(new_texts.items()):
        if dry:
            print("rewrite", path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

    # 4. the structural edits
    if not dry:
        step_checkpoint_error()
        step_evaluation()
    return 0


# --------------------------------------------------------------------------------------------------
# structural edits (each idempotent)
# --------------------------------------------------------------------------------------------------

def _read(path):
    return open(path, encoding="utf-8").read()


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _top_level(text, name):
    """The source span of the top-level class or function ``name`` (decorators included, and the
    blank lines after it)."""
    tree = ast.parse(text)
    offs = _line_offsets(text)
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            start = offs[first - 1]
            end = offs[node.end_lineno]
            while end < len(text) and text[end] == "\n":
                end += 1
            return start, end
    return None


def step_checkpoint_error():
    """``CheckpointError`` moves to ``checkpoint_files`` (beside ``CheckpointWriteError``), so that
    ``checkpoint_validate`` raises it without importing ``checkpoint`` (the cycle checkpoint <->
    checkpoint_validate); ``checkpoint`` re-exports it."""
    ck, files, val = (os.path.join(PKG, "training", f) for f in ("checkpoint.py", "checkpoint_files.py",
                                                                 "checkpoint_validate.py"))
    text = _read(ck)
    span = _top_level(text, "CheckpointError")
    if span is None:
        return
    cls = text[span[0]:span[1]].rstrip("\n") + "\n"
    text = text[:span[0]] + text[span[1]:]
    text, n = re.subn(r"from \.checkpoint_files import \(?", lambda m: m.group(0) + "CheckpointError, ", text, count=1)
    assert n == 1, "checkpoint.py: no import from .checkpoint_files"
    _write(ck, text)
    ftext = _read(files)
    m = re.search(r"^__all__ = \[", ftext, re.M)
    ftext = ftext[:m.end()] + '"CheckpointError", ' + ftext[m.end():]
    tree = ast.parse(ftext)
    offs = _line_offsets(ftext)
    after = next(n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets))
    pos = offs[after.end_lineno]
    ftext = ftext[:pos] + "\n\n" + cls + ftext[pos:]
    _write(files, ftext)
    vtext = _read(val)
    vtext = vtext.replace("from .checkpoint import CheckpointError", "from .checkpoint_files import CheckpointError")
    _write(val, vtext)


_EVAL_HEAD = '''"""Evaluation: :class:`EvalResult` (what every evaluation reports) and :func:`evaluate`, the encoder's
teacher-forced loop (the model kinds' own loops build on them, :mod:`.kinds`). Kept apart from the
trainer so that the kinds, which the trainer uses, do not import it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..nn.loss import CrossEntropyLoss

__all__ = ["EvalResult", "evaluate"]


'''


def step_evaluation():
    """``EvalResult`` and ``evaluate`` move from ``training/trainer.py`` to ``training/evaluation.py``
    (the trainer re-exports them); the kinds import them from there (the cycle kinds <-> training)."""
    tr = os.path.join(PKG, "training", "trainer.py")
    ev = os.path.join(PKG, "training", "evaluation.py")
    kinds = os.path.join(PKG, "training", "kinds.py")
    if os.path.exists(ev):
        return
    text = _read(tr)
    pieces = []
    for name in ("EvalResult", "evaluate"):
        span = _top_level(text, name)
        pieces.append(text[span[0]:span[1]].rstrip("\n"))
        text = text[:span[0]] + text[span[1]:]
    text = text.rstrip("\n") + "\n"
    tree = ast.parse(text)
    offs = _line_offsets(text)
    last_import = max(n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    pos = offs[last_import]
    text = text[:pos] + "from .evaluation import EvalResult, evaluate\n" + text[pos:]
    _write(tr, text)
    _write(ev, _EVAL_HEAD + "\n\n\n".join(pieces) + "\n")
    subprocess.run(["git", "add", ev], check=True)
    ktext = _read(kinds)
    ktext = re.sub(r"from \.trainer import (EvalResult|evaluate)\b", r"from .evaluation import \1", ktext)
    _write(kinds, ktext)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print the moves and rewrites, change nothing")
    args = p.parse_args(argv)
    if not os.path.isdir(PKG):
        sys.exit("run from the checkout's root")
    return run(dry=args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
