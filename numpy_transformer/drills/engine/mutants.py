"""Mutants: systematic single changes of a solution's arithmetic, offered as mistakes when no listed
mistake and no family explains a failure.

Families are written by people who looked at mistakes, so they name the mistakes their authors
thought of. A *mutant* is generated instead, as in mutation testing: every function of the
exercise's ``solution.py`` is parsed (:mod:`ast`), and each expression of its statements is changed
in one classic way at a time:

* a numeric constant ``c`` written as ``2c``, ``c/2``, ``-c``, ``0`` or ``1`` (and ``1e-5`` <-> ``1e-6``,
  ``0.5`` <-> ``2``);
* a binary operator swapped (``+`` <-> ``-``, ``*`` <-> ``/``), a power dropped (``a ** b`` -> ``a``),
  an operand dropped from a sum or a product (``a + b`` -> ``a``, ``b``);
* a reduction's ``axis`` changed (``-1`` -> ``0``, ``-2``, none) or its ``keepdims`` dropped;
  ``np.sum`` <-> ``np.mean``;
* a transpose (``.T``, ``swapaxes``, ``transpose``) removed, or added to an operand of ``@``;
* ``np.sqrt``, ``np.exp``, ``np.log``, ``np.tanh`` removed;
* a call's first two arguments swapped (``np.where``: its two branches);
* a slice bound moved by one; a comparison flipped (``>`` <-> ``>=``, ``<`` <-> ``>``, ``==`` <-> ``!=``);
  a boolean negated (``True`` <-> ``False``, ``not``/``~`` removed);
* a returned tuple's neighbours exchanged; a unary minus removed, or added to an assigned value.

Each mutant is a text patch of ``solution.py`` (the lines holding the expression -> the same lines with
it rewritten), and a :class:`~.definition.Mistake` whose title is generated from the change in a
teacher's words: "in layer_norm_forward, `rstd = 1.0 / np.sqrt(var + eps)` computed as `rstd = 1.0 /
(var + eps)`: the sqrt of `var + eps` left out". The judge runs them lazily
(:class:`MutantSearch`): only on a failing case with a wrong array that no known mistake reproduces and
no verified reading (:mod:`.readings`) explains, where the report would say "no known mistake explains
this failure", only the mutants of the functions returning those arrays (and the solution's helpers),
at most :data:`MAX_MUTANT_RUNS` of them on the first such case, then only those that reproduced an array
there, on every later failing case.
"""

from __future__ import annotations

import ast
import functools
import io
import tokenize
from typing import List, Optional, Sequence, Tuple

from . import diagnose
from .definition import MISTAKE_FINDERS, Mistake
from .harness import run_impl
from .matching import variants_wrong

__all__ = ["MAX_MUTANT_RUNS", "MutantSearch", "mutants_of", "of_exercise"]

#: the mutant search's bound: at most this many mutants run on the first case that needs them
MAX_MUTANT_RUNS = 150

_SWAP_OP = {ast.Add: (ast.Sub, "-"), ast.Sub: (ast.Add, "+"), ast.Mult: (ast.Div, "/"), ast.Div: (ast.Mult, "*")}
_OP_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
_CMP = {ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt,), ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt,),
        ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,)}
_CMP_TEXT = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_DROPPABLE = ("sqrt", "exp", "log", "tanh")
_REDUCTIONS = ("sum", "mean", "max", "min", "var", "std", "prod", "cumsum", "argmax")
_TRANSPOSES = ("swapaxes", "transpose")
#: the order the operators are offered in (the budget keeps the first ones)
_PRIORITY = ("operator", "operand", "axis", "transpose", "function", "reduction", "minus", "constant",
             "compare", "return", "slice", "arguments", "bool")


def _text(node) -> str:
    return ast.unparse(node)


def _func_name(call) -> Optional[str]:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _constants(c) -> List[Tuple[object, str]]:
    near = {1e-5: 1e-6, 1e-6: 1e-5, 0.5: 2.0, 2.0: 0.5}
    out = [(c * 2, "doubled"), (c / 2, "halved"), (-c, "negated"), (0, "set to 0"), (1, "set to 1")]
    if c in near:
        out.append((near[c], f"written as {near[c]!r}"))
    seen, keep = {c}, []
    for v, how in out:
        v = int(v) if isinstance(c, int) and float(v).is_integer() else v
        if v not in seen:
            seen.add(v)
            keep.append((v, how))
    return keep


def _expression_mutants(node, parent) -> List[Tuple[str, ast.AST, str]]:
    """``[(kind, replacement node, what the change means)]`` for one expression ``node``."""
    out = []
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        out.append(("bool", ast.Constant(not node.value), f"{node.value} negated"))
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not (isinstance(parent, ast.keyword) and parent.arg == "axis"):
        for v, how in _constants(node.value):
            out.append(("constant", ast.Constant(v), f"the constant {node.value!r} {how}"))
    elif isinstance(node, ast.BinOp):
        t, a, b = type(node.op), _text(node.left), _text(node.right)
        if t in _SWAP_OP:
            op, sym = _SWAP_OP[t]
            out.append(("operator", ast.BinOp(node.left, op(), node.right), f"`{_OP_TEXT[t]}` written as `{sym}`"))
        if t is ast.Pow:
            out.append(("operator", node.left, f"the power `** {b}` dropped"))
        if t in (ast.Add, ast.Sub):
            out.append(("operand", node.left, f"the term `{b}` dropped"))
            right = node.right if t is ast.Add else ast.UnaryOp(ast.USub(), node.right)
            out.append(("operand", right, f"the term `{a}` dropped"))
        if t is ast.Mult:
            out.append(("operand", node.left, f"the factor `{b}` dropped"))
            out.append(("operand", node.right, f"the factor `{a}` dropped"))
        if t is ast.Div:
            out.append(("operand", node.left, f"the division by `{b}` dropped"))
        if t is ast.MatMult:
            for side, other in (("left", node.right), ("right", node.left)):
                operand = getattr(node, side)
                if isinstance(operand, ast.Attribute) and operand.attr == "T":
                    continue
                tr = ast.Attribute(operand, "T", ast.Load())
                new = ast.BinOp(tr, node.op, other) if side == "left" else ast.BinOp(other, node.op, tr)
                out.append(("transpose", new, f"`{_text(operand)}` transposed"))
    elif isinstance(node, ast.Attribute) and node.attr == "T":
        out.append(("transpose", node.value, f"the transpose of `{_text(node.value)}` left out"))
    elif _negative_constant(node):
        c = -node.operand.value
        for v, how in _constants(c):
            out.append(("constant", ast.Constant(v), f"the constant {c!r} {how}"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        out.append(("minus", node.operand, "the minus sign dropped"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
        out.append(("bool", node.operand, f"the negation of `{_text(node.operand)}` left out"))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
        t = type(node.ops[0])
        for new in _CMP[t]:
            out.append(("compare", ast.Compare(node.left, [new()], node.comparators),
                        f"`{_CMP_TEXT[t]}` written as `{_CMP_TEXT[new]}`"))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        for bound in ("lower", "upper"):
            b = getattr(node.slice, bound)
            if b is None:
                continue
            for d, sym in ((1, "+"), (-1, "-")):
                sl = ast.Slice(node.slice.lower, node.slice.upper, node.slice.step)
                setattr(sl, bound, ast.BinOp(b, ast.Add() if d > 0 else ast.Sub(), ast.Constant(1)))
                out.append(("slice", ast.Subscript(node.value, sl, ast.Load()),
                            f"the slice's {bound} bound `{_text(b)}` moved to `{_text(b)} {sym} 1`"))
    elif isinstance(node, ast.Call):
        out.extend(_call_mutants(node))
    return out


def _call_mutants(node) -> List[Tuple[str, ast.AST, str]]:
    out, name = [], _func_name(node)
    method = isinstance(node.func, ast.Attribute) and not (isinstance(node.func.value, ast.Name)
                                                           and node.func.value.id in ("np", "math"))

    def call(args=None, keywords=None, func=None):
        return ast.Call(func or node.func, node.args if args is None else args,
                        node.keywords if keywords is None else keywords)

    for i, kw in enumerate(node.keywords):
        rest = node.keywords[:i] + node.keywords[i + 1:]
        if kw.arg == "axis":
            old = _text(kw.value)
            for new in ("0", "-1", "-2", None):
                if new == old:
                    continue
                if new is None:
                    out.append(("axis", call(keywords=rest), f"the {name} over axis {old} taken over every axis"))
                else:
                    kws = rest[:i] + [ast.keyword("axis", ast.parse(new, mode="eval").body)] + rest[i:]
                    out.append(("axis", call(keywords=kws), f"the {name} over axis {old} taken over axis {new}"))
        if kw.arg == "keepdims":
            out.append(("axis", call(keywords=rest), f"the {name}'s keepdims dropped (the axis is not kept)"))
    if name in ("sum", "mean") and (method or isinstance(node.func, ast.Attribute)):
        other = "mean" if name == "sum" else "sum"
        func = ast.Attribute(node.func.value, other, ast.Load())
        out.append(("reduction", call(func=func), f"a {other} where the {name} belongs"))
    if name in _TRANSPOSES:
        target = node.func.value if method else (node.args[0] if node.args else None)
        if target is not None:
            out.append(("transpose", target, f"the {name} of `{_text(target)}` left out"))
    if name in _DROPPABLE and not method and len(node.args) == 1 and not node.keywords:
        out.append(("function", node.args[0], f"the {name} of `{_text(node.args[0])}` left out"))
    if name not in _REDUCTIONS + _TRANSPOSES:
        args = list(node.args)
        i = 1 if name == "where" and len(args) == 3 else 0
        if len(args) >= i + 2 and _text(args[i]) != _text(args[i + 1]) \
                and not any(isinstance(a, ast.Starred) for a in args):
            args[i], args[i + 1] = args[i + 1], args[i]
            out.append(("arguments", call(args=args), f"the {name}'s arguments `{_text(node.args[i])}` and "
                                                      f"`{_text(node.args[i + 1])}` exchanged"))
    return out


#: calls whose arguments are a shape or an axis order (a mutation there only breaks the shape)
_SHAPE_CALLS = ("reshape", "transpose", "swapaxes", "moveaxis", "expand_dims", "broadcast_to", "zeros", "ones",
                "empty", "full", "arange", "eye", "tril", "triu", "astype", "zeros_like", "ones_like", "empty_like")


def _negative_constant(node) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
        and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool)


#: keyword arguments whose values are options, not arithmetic (the axis has its own mutations)
_OPTION_KEYWORDS = ("axis", "keepdims", "dtype", "out", "axes")


def _walk(root, parent):
    """``(node, parent)`` for ``root`` and every expression below it, but not the values of the option
    keywords (``axis=-1`` is changed as an axis, never as the constant 1)."""
    todo = [(root, parent)]
    while todo:
        node, par = todo.pop(0)
        yield node, par
        if _negative_constant(node) or (isinstance(node, ast.Call) and _func_name(node) in _SHAPE_CALLS):
            continue                                 # -1 is one constant; a shape's numbers are no arithmetic
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.keyword) and child.arg in _OPTION_KEYWORDS:
                continue
            if isinstance(child, ast.keyword):
                todo.append((child.value, node))
            elif isinstance(child, ast.expr):
                todo.append((child, node))


def _statement_mutants(stmt) -> List[Tuple[str, ast.AST, ast.AST, str, ast.AST]]:
    """``[(kind, node, replacement, meaning, parent of node)]`` for the expressions of one simple statement (or a
    compound statement's header)."""
    roots = []
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)) and stmt.value is not None:
        roots.append(stmt.value)
    elif isinstance(stmt, (ast.If, ast.While)):
        roots.append(stmt.test)
    elif isinstance(stmt, ast.For):
        roots.append(stmt.iter)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return []                                   # a docstring
    out = []
    for root in roots:
        for node, parent in _walk(root, stmt):
            for kind, new, meaning in _expression_mutants(node, parent):
                out.append((kind, node, new, meaning, parent))
    if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple):
        elts = stmt.value.elts
        for i in range(len(elts) - 1):
            if _text(elts[i]) != _text(elts[i + 1]):
                swapped = list(elts)
                swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
                out.append(("return", stmt.value, ast.Tuple(swapped, ast.Load()),
                            f"the returned `{_text(elts[i])}` and `{_text(elts[i + 1])}` exchanged", stmt))
    single = not isinstance(stmt, ast.Assign) or all(isinstance(t, (ast.Name, ast.Subscript, ast.Attribute))
                                                       for t in stmt.targets)
    if isinstance(stmt, (ast.Assign, ast.AugAssign)) and single \
            and not isinstance(stmt.value, (ast.UnaryOp, ast.Tuple, ast.Name)):
        out.append(("minus", stmt.value, ast.UnaryOp(ast.USub(), stmt.value), "the value's sign flipped", stmt))
    return out


def _needs_parens(parent, node) -> bool:
    """Whether an expression replacing ``node`` inside ``parent`` must be parenthesised."""
    if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Attribute, ast.BoolOp, ast.Await)):
        return True
    if isinstance(parent, ast.Subscript) and node is parent.value:
        return True
    return isinstance(parent, ast.Call) and node is parent.func


def _splice(lines, node, new, parent) -> Tuple[str, str]:
    """``(old text, new text)``: the whole lines holding ``node``, and the same with ``node`` rewritten
    (an expression over several lines becomes one). The offsets are in UTF-8 bytes, as :mod:`ast` gives them."""
    first, last = node.lineno - 1, node.end_lineno - 1
    old = "\n".join(lines[first:last + 1])
    head = lines[first].encode()[:node.col_offset].decode()
    tail = lines[last].encode()[node.end_col_offset:].decode()
    text = _text(new)
    if not isinstance(new, (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.Tuple)) \
            and _needs_parens(parent, node):
        text = f"({text})"
    return old, head + text + tail


def _shown(text) -> str:
    """The code of ``text`` on one line, without its comments (for a title)."""
    code = []
    for line in text.split("\n"):
        try:
            toks = list(tokenize.generate_tokens(io.StringIO(line).readline))
            cut = next((t.start[1] for t in toks if t.type == tokenize.COMMENT), None)
        except (tokenize.TokenError, SyntaxError):
            cut = None
        code.append(line if cut is None else line[:cut])
    return " ".join(" ".join(code).split())


def _unique(source, lines, node, old, new) -> Optional[Tuple[str, str]]:
    """``(old, new)`` made unique in ``source`` by the lines before it (at most three), or None."""
    first = node.lineno - 1
    for k in range(4):
        if source.count(old) == 1:
            return old, new
        if first - k - 1 < 0:
            return None
        before = lines[first - k - 1]
        old, new = before + "\n" + old, before + "\n" + new
    return None


def mutants_of(source: str, functions: Optional[Sequence[str]] = None) -> Tuple[Mistake, ...]:
    """Every single mutation of the functions of ``source`` (those named in ``functions``, else all), as
    :class:`Mistake` patches of it, in the order of :data:`_PRIORITY` then of the source."""
    tree = ast.parse(source)
    lines = source.split("\n")
    found: List[Tuple[int, int, Mistake]] = []
    seen = set()
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or (functions is not None and fn.name not in functions):
            continue
        n = 0
        for stmt in ast.walk(fn):
            if not isinstance(stmt, ast.stmt) or stmt is fn:
                continue
            for kind, node, new, meaning, parent in _statement_mutants(stmt):
                old, new_text = _splice(lines, node, new, parent)
                patch = _unique(source, lines, node, old, new_text)
                if patch is None or patch[0] == patch[1] or patch in seen:
                    continue
                seen.add(patch)
                n += 1
                shown_old, shown_new = _shown(old), _shown(new_text)
                title = f"in {fn.name}, `{shown_old}` computed as `{shown_new}`: {meaning}"
                explain = (f"one change of the solution's line reproduces your wrong arrays: {meaning} "
                           "(found by changing the solution's arithmetic one operator at a time; your code "
                           "may spell the line differently)")
                fix = f"in {fn.name}, compute it as `{shown_old}`"
                found.append((_PRIORITY.index(kind), len(found),
                              Mistake(f"mutant_{fn.name}_{n}", title, explain, fix, (patch,))))
    found.sort(key=lambda t: (t[0], t[1]))
    return tuple(m for _, _, m in found)


@functools.lru_cache(maxsize=64)
def _mutants_of_file(path, functions):
    with open(path, encoding="utf-8") as fh:
        return mutants_of(fh.read(), functions)


def of_exercise(ex, functions=None) -> Tuple[Mistake, ...]:
    """The mutants of ``ex``'s solution (of ``functions`` only, when given), minus any patch a known
    mistake already makes."""
    taken = {cfg for m in ex.known for cfg in m.configs}
    every = _mutants_of_file(ex.solution_path, None)
    wanted = None if functions is None else set(functions)
    return tuple(m for m in every if m.patches not in taken
                 and (wanted is None or m.id.split("_", 1)[1].rsplit("_", 1)[0] in wanted))


def _helpers(ex) -> Tuple[str, ...]:
    with open(ex.solution_path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in ex.functions)


class MutantSearch:
    """The mutants one check runs (one per check): on the first failing case with wrong arrays no known
    mistake reproduces, the mutants of the functions returning them (and the solution's helpers), at most
    :data:`MAX_MUTANT_RUNS`, cheapest first; a mutant that fails to run there or reproduces no wrong array
    (it changes nothing, or something else) is dropped; afterwards only the mutants that reproduced an
    array run (two that agree on the first case may part on a later one: axis 0 and -2 of a 2-D input)."""

    def __init__(self, ex):
        self.ex = ex
        self.candidates: Optional[List[Mistake]] = None

    def run(self, inputs, results, outputs, ref, tol, base):
        """Try the mutants on one case (the judge calls it when some wrong array has neither a known mistake
        nor a verified reading) against every wrong array; record matches in ``results[name]["variants"]``;
        return the ids of the mutants this case contradicts."""
        ex = self.ex
        wrong = [n for n, r in results.items() if not r["ok"] and r.get("problem") in ("value", "nonfinite", "shape")
                 and n in outputs]
        if not wrong:
            return []
        todo = wrong                  # a mutant may explain more of them than a known mistake did
        first = self.candidates is None
        if first:
            wrong_fns = {f for n, f in ex.outputs if n in todo and not results[n].get("variants")}
            tries = list(of_exercise(ex, tuple(sorted(wrong_fns | set(_helpers(ex))))))[:MAX_MUTANT_RUNS]
        else:
            tries = self.candidates
        found, contradicted = [], []
        for m in tries:
            rec = run_impl(ex, ex.variant(m.patches), inputs, watch=False)
            if rec.failure is not None and first:
                continue
            vout = rec.outputs
            vw = variants_wrong(ex, inputs, {m.id: [vout]}, ref, tol, base)[m.id][0]
            hit = False
            for n in todo:
                if n in vw and n in vout and diagnose.matches(outputs[n], vout[n]):
                    if m.id not in results[n].setdefault("variants", []):
                        results[n]["variants"].append(m.id)
                    hit = True
            if hit:
                found.append(m)
                if any(results[n]["ok"] and n in vw for n, _ in ex.outputs):
                    contradicted.append(m.id)
        if first:
            self.candidates = found
        return contradicted


def by_id(ex, mistake_id) -> Mistake:
    """The mutant ``mistake_id`` of ``ex``; KeyError when it has none of that id."""
    for m in _mutants_of_file(ex.solution_path, None):
        if m.id == mistake_id:
            return m
    raise KeyError(mistake_id)


MISTAKE_FINDERS.append(("mutant_", by_id))             # Exercise.mistake finds a named mutant through it
