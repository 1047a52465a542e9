"""Checks of a checkpoint's content made before anything is read in full or built from it.

A checkpoint is a zip of ``.npy`` members. :func:`read_headers` reads every member's header (shape,
dtype) through ``zipfile`` without reading its data, and refuses object dtypes (they would need
unpickling) and a header whose declared size disagrees with the bytes the member holds (a header
"declaring 2**40 elements" would otherwise make NumPy allocate them). :func:`check_model_config` holds
a model configuration against the stored arrays that witness its sizes (``d_model`` is the width of the
token embedding, ``num_layers`` the number of layers stored, ...) and against this machine's memory;
:func:`check_training_state` checks what ``Trainer.save`` stores (step, batcher, generators) and the
training configuration against the model configuration, and the run's settings (``run``: the ``train``
command's --eval-every, --log-every, --trace-every and its log, which must be the checkpoint's own:
``runlog.resolve_stored_log``); :func:`check_finite_state` refuses a NaN/inf weight or optimizer
state and a negative Adam second moment (a state no training step can leave). Each refusal is a
``CheckpointError`` naming the field, what it holds and what was expected, raised before any model
or data set is built.
"""

from __future__ import annotations

import json
import os
import re
import zipfile

import numpy as np

__all__ = ["read_headers", "check_model_config", "check_model_memory", "check_memory", "check_training_state",
           "check_run_settings", "check_finite_state", "memory_bytes"]


def _error(message):
    from .checkpoint_files import CheckpointError
    return CheckpointError(message)


def memory_bytes() -> int:
    """This machine's physical memory in bytes (2**40 where the OS does not tell)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2 ** 40


def _gib(n):
    return f"{n / 2 ** 30:.3g} GiB"


def check_memory(path, what, nbytes):
    """Refuse ``what`` (a phrase naming the fields) when building it needs more than this machine's memory."""
    if nbytes > memory_bytes():
        raise _error(f"{path}: {what} would need about {_gib(nbytes)} to build, more than this machine's "
                     f"{_gib(memory_bytes())} of memory; the checkpoint is damaged or not meant for this machine")


# -- the archive's members -----------------------------------------------------------------------------
def read_headers(path):
    """``{entry: (shape, dtype)}`` for every ``.npy`` member of the archive at ``path``, data unread.

    Raises CheckpointError for an unreadable header, an object dtype (pickled data, never loaded) or a
    header whose ``shape`` and ``dtype`` need more (or fewer) bytes than the member holds.
    """
    headers, total = {}, 0
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[:-len(".npy")]
            with z.open(info) as f:
                try:
                    version = np.lib.format.read_magic(f)
                    read = {(1, 0): np.lib.format.read_array_header_1_0,
                            (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                    if read is None:
                        raise ValueError(f"unknown .npy format version {version}")
                    shape, _, dtype = read(f, max_header_size=10000)
                except ValueError as exc:
                    if "allow_pickle" in str(exc) or "object" in str(exc).lower():
                        raise _pickled(path) from exc
                    raise _error(f"{path} is damaged: entry {name!r} has an unreadable array header ({exc})") from exc
                offset = f.tell()
            if dtype.hasobject:
                raise _pickled(path)
            count = int(np.prod(shape, dtype=object))
            declared = count * dtype.itemsize
            held = info.file_size - offset
            if declared != held:
                raise _error(f"{path} is damaged: entry {name!r} declares shape {tuple(shape)} of {dtype} "
                             f"({count} elements, {declared} bytes) but holds {held} bytes of data")
            headers[name] = (tuple(shape), dtype)
            total += held
    check_memory(path, "its arrays", total)
    return headers


def _pickled(path):
    return _error(f"{path} holds pickled Python objects; checkpoints hold plain arrays only and are never "
                  "unpickled (loading a pickle can run arbitrary code)")


# -- the model configuration against the stored weights ---------------------------------------------------
# per model kind: (field, key pattern, axis): the size ``field`` is axis ``axis`` of the first stored
# array whose key matches; (field, layer pattern): ``field`` layers are stored (distinct indices)
_SIZES = {
    "encoder": [("vocab_size", r"embed\.weight", 0), ("d_model", r"embed\.weight", 1),
                ("dim_feedforward", r"(encoder\.)?layers\.0\.(mlp\.)?linear1\.weight", 0),
                ("max_len", r"pos_embed\.weight", 0)],
    "seq2seq": [("src_vocab_size", r"src_embed\.weight", 0), ("tgt_vocab_size", r"tgt_embed\.weight", 0),
                ("d_model", r"src_embed\.weight", 1),
                ("dim_feedforward", r"transformer\.encoder\.layers\.0\.linear1\.weight", 0),
                ("max_len", r"pos_embed\.weight", 0)],
    "gpt": [("vocab_size", r"wte\.weight", 0), ("n_embd", r"wte\.weight", 1),
            ("n_inner", r"h\.0\.(linear1|mlp\.linear1|mlp\.gate_proj)\.weight", 0),
            ("block_size", r"wpe\.weight", 0)],
}
_LAYERS = {
    "encoder": [("num_layers", r"(?:encoder\.)?layers\.(\d+)\.")],
    "seq2seq": [("num_encoder_layers", r"transformer\.encoder\.layers\.(\d+)\."),
                ("num_decoder_layers", r"transformer\.decoder\.layers\.(\d+)\.")],
    "gpt": [("n_layer", r"h\.(\d+)\.")],
}
_WIDTH = {"encoder": "d_model", "seq2seq": "d_model", "gpt": "n_embd"}


def _int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def check_model_config(path, kind, model_config, shapes):
    """Refuse a ``model_config`` whose sizes disagree with the stored weights' ``shapes``
    (``{state_dict key: shape}``) or that would not fit in memory; a size no stored array witnesses
    is left to the model's own checks. Nothing is built."""
    for name, pattern, axis in _SIZES.get(kind, ()):
        got = model_config.get(name)
        key = next((k for k in shapes if re.fullmatch(pattern, k) and len(shapes[k]) > axis), None)
        if _int(got) and key is not None and got != shapes[key][axis]:
            raise _error(f"{path}: model_config says {name} {got}, but the stored model/{key} has shape "
                         f"{list(shapes[key])} ({name} {shapes[key][axis]}); the checkpoint is damaged")
    for name, pattern in _LAYERS.get(kind, ()):
        got = model_config.get(name)
        stored = {m.group(1) for k in shapes for m in [re.match(pattern, k)] if m}
        if _int(got) and stored and got != len(stored):
            raise _error(f"{path}: model_config says {name} {got}, but the checkpoint stores {len(stored)} "
                         f"layers; the checkpoint is damaged")
    check_model_memory(path, kind, model_config)


def check_model_memory(path, kind, model_config):
    """Refuse a ``model_config`` whose model would not fit in this machine's memory (absurd sizes)."""
    check_memory(path, f"model_config {_sizes_text(model_config)}", _model_bytes(kind, model_config))


def _sizes_text(cfg):
    return "(" + ", ".join(f"{k} {v}" for k, v in cfg.items() if _int(v)) + ")"


def _model_bytes(kind, cfg):
    """A generous estimate of the bytes building the model takes (weights, gradients, tables)."""
    get = lambda *names: sum(int(cfg[n]) for n in names if _int(cfg.get(n)))   # noqa: E731
    width = get(_WIDTH.get(kind, "d_model"))
    vocab = get("vocab_size", "src_vocab_size", "tgt_vocab_size")
    layers = get("num_layers", "num_encoder_layers", "num_decoder_layers", "n_layer")
    ff = get("dim_feedforward", "n_inner")
    rows = get("max_len", "block_size", "relative_attention_num_buckets")
    params = 2 * vocab * width + layers * (8 * width * width + 3 * width * ff) + 2 * rows * width
    return 8 * 2 * params


# -- what Trainer.save stores ---------------------------------------------------------------------------
# the training configuration's sizes and the model configuration's names for them, per kind
_SAME = {
    "encoder": {"vocab_size": "vocab_size", "d_model": "d_model", "nhead": "nhead", "num_layers": "num_layers",
                "dim_feedforward": "dim_feedforward", "seq_len": "max_len"},
    "seq2seq": {"d_model": "d_model", "nhead": "nhead", "num_layers": "num_encoder_layers",
                "dim_feedforward": "dim_feedforward"},
    "gpt": {"d_model": "n_embd", "nhead": "n_head", "num_layers": "n_layer", "dim_feedforward": "n_inner"},
}
TRAINING_KEYS = ("step", "generators", "batcher")


def check_training_state(path, kind, model_config, config, extra_json, perm_shape, load_perm):
    """Check a training checkpoint's configuration and state before a ``Trainer`` is built from it.

    ``config`` is the stored training configuration (a dict), ``extra_json`` what ``Trainer.save``
    stored beside it, ``perm_shape`` the shape of the stored batch permutation (None: absent) and
    ``load_perm()`` reads it (only once its shape is known to be sound).
    """
    for name, model_name in _SAME.get(kind, {}).items():
        got, want = config.get(name), model_config.get(model_name)
        if _int(got) and _int(want) and got != want:
            raise _error(f"{path}: the training configuration says {name} {got}, but model_config says "
                         f"{model_name} {want}; the checkpoint is damaged")
    rows = sum(int(config[n]) for n in ("num_train", "num_val") if _int(config.get(n)))
    length = 4 * int(config["digits"]) + 8 if kind == "gpt" and _int(config.get("digits")) else \
        2 * int(config["seq_len"]) + 2 if _int(config.get("seq_len")) else 1
    if config.get("text"):          # --text: the windows are views of the text's ids (and the batch order)
        check_memory(path, "the text's token ids and batch permutation", rows * 24)
    else:
        check_memory(path, "the task's data (num_train + num_val rows of seq_len tokens)", rows * (32 * length + 200))
    if not any(k in extra_json for k in TRAINING_KEYS) and perm_shape is None:
        return                                                   # weights only: nothing to resume
    missing = [k for k in TRAINING_KEYS if k not in extra_json] + ([] if perm_shape else ["batcher_perm"])
    if missing:
        raise _error(f"{path}: the training state is incomplete: {missing} missing (expected step, generators, "
                     f"batcher and the batch permutation, as Trainer.save writes them); the checkpoint is damaged")
    step = extra_json["step"]
    if not _int(step) or step < 0:
        raise _error(f"{path}: step must be an int >= 0, got {step!r}")
    gens = extra_json["generators"]
    if not isinstance(gens, dict):
        raise _error(f"{path}: generators must map names to generator states, got {type(gens).__name__}")
    for name, state in gens.items():
        _check_rng_state(path, f"generators[{name!r}]", state)
    _check_batcher(path, config, extra_json["batcher"], step, perm_shape, load_perm)
    scheduler = extra_json.get("scheduler")
    if scheduler is not None and not isinstance(scheduler, dict):
        raise _error(f"{path}: scheduler must be a scheduler state_dict (a JSON object), got {scheduler!r}")
    check_run_settings(path, extra_json.get("run", {}))


#: the ``train`` command's settings stored in ``run``: each one's least value
_RUN_MINIMUM = {"eval_every": 0, "log_every": 1, "trace_every": 0}


def check_run_settings(path, run):
    """``run`` (``extra_json["run"]``) must map ``eval_every`` and ``trace_every`` to ints >= 0,
    ``log_every`` to an int >= 1 (each optional), ``finished`` (the run's final evaluation and save were
    done: ``train --resume`` refuses to continue it without a larger ``--steps``) to a bool, and ``log``
    to the checkpoint's own log (``runlog.resolve_stored_log``: never a path outside its directory)."""
    from .runlog import resolve_stored_log
    if not isinstance(run, dict):
        raise _error(f"{path}: run must be a JSON object of the train command's settings, got {run!r}")
    unknown = sorted(set(run) - set(_RUN_MINIMUM) - {"log", "finished"})
    if unknown:
        raise _error(f"{path}: run holds unknown settings {unknown} (expected "
                     f"{sorted(_RUN_MINIMUM) + ['finished', 'log']})")
    for name, least in _RUN_MINIMUM.items():
        if name in run and (not _int(run[name]) or run[name] < least):
            raise _error(f"{path}: run.{name} must be an int >= {least}, got {run[name]!r}")
    if not isinstance(run.get("finished", False), bool):
        raise _error(f"{path}: run.finished must be true or false, got {run['finished']!r}")
    if "log" in run:
        try:
            resolve_stored_log(path, run["log"])
        except ValueError as exc:
            raise _error(f"{path}: {exc}") from None


def check_finite_state(path, model_state, optim_state):
    """Every floating-point weight and optimizer state must be finite, and Adam's second moments
    (``exp_avg_sq``, ``max_exp_avg_sq``) >= 0: a training step never leaves anything else (a
    non-finite loss stops the run before its update), so such a file is damaged."""
    named = [(f"model/{k}", v) for k, v in model_state.items()]
    for i, s in sorted((optim_state or {}).get("state", {}).items()):
        named += [(f"optim/state/{i}/{k}", v) for k, v in s.items()]
    for name, v in named:
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc":
            bad = ~np.isfinite(v)
            if bad.any():
                raise _error(f"{path}: {name} holds {int(bad.sum())} non-finite value(s) (NaN or inf) of "
                             f"{v.size}; a saved training state is always finite: the checkpoint is damaged")
            if name.rsplit("/", 1)[-1] in ("exp_avg_sq", "max_exp_avg_sq") and (v < 0).any():
                raise _error(f"{path}: {name} (Adam's second moment, a mean of squares) holds "
                             f"{int((v < 0).sum())} negative value(s), least {v.min()!r}; the checkpoint is "
                             f"damaged")


_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


def _check_rng_state(path, what, state):
    """``state`` must be a NumPy bit generator's state (what ``bit_generator.state`` returns)."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise _error(f"{path}: {what} is not a NumPy generator state (expected a dict with 'bit_generator' one "
                     f"of {list(_BIT_GENERATORS)}), got {str(state)[:80]!r}")
    try:
        getattr(np.random, name)().state = state
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise _error(f"{path}: {what} is not a valid {name} state: {exc}") from exc


def _check_batcher(path, config, batcher, step, perm_shape, load_perm):
    if not isinstance(batcher, dict):
        raise _error(f"{path}: the batcher state must be a JSON object, got {batcher!r}")
    missing = [k for k in ("rng", "pos", "epoch") if k not in batcher]
    if missing:
        raise _error(f"{path}: the batcher state is missing {missing} (expected rng, pos and epoch)")
    try:
        rng = json.loads(batcher["rng"]) if isinstance(batcher["rng"], str) else None
    except json.JSONDecodeError:
        rng = None
    _check_rng_state(path, "the batcher's rng", rng if rng is not None else batcher["rng"])
    n = config.get("num_train")
    if len(perm_shape) != 1 or perm_shape[0] not in (0, n):
        raise _error(f"{path}: the batch permutation has shape {list(perm_shape)}, expected [{n}] (num_train) "
                     f"or [0] (before the first step)")
    size = perm_shape[0]
    if (size == 0) != (step == 0):
        raise _error(f"{path}: the batch permutation has {size} entries at step {step}; expected "
                     f"{'none at step 0' if step == 0 else f'{n} (num_train) after the first step'}")
    bs = config.get("batch_size")
    pos, epoch = batcher["pos"], batcher["epoch"]
    if not _int(pos) or not 0 <= pos <= size or (_int(bs) and pos % bs):
        raise _error(f"{path}: the batcher position must be a multiple of batch_size {bs} in [0, {size}], "
                     f"got {pos!r}")
    if not _int(epoch) or epoch < (1 if size else 0):
        raise _error(f"{path}: the batcher epoch must be an int >= {1 if size else 0}, got {epoch!r}")
    if size:
        perm = load_perm()
        if perm.dtype.kind not in "iu" or not np.array_equal(np.sort(perm), np.arange(size)):
            raise _error(f"{path}: the batch permutation is not a permutation of 0..{size - 1} (dtype {perm.dtype}, "
                         f"values in [{perm.min()}, {perm.max()}]); the checkpoint is damaged")
