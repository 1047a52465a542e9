"""The messages between ``drill check`` and its grading child: plain JSON and plain arrays, nothing else.

A message is a nested structure of dicts (string keys), lists, tuples, ``None``, booleans, numbers,
strings and NumPy arrays of a numeric or boolean dtype. On the wire it is one frame: an 8-byte length,
then a JSON header (the structure, each array replaced by ``{"__nd__": k}``) and the arrays in
``.npy`` format, written and read with ``allow_pickle=False``: no object crosses, so nothing the child
sends can run code in the parent, and the parent checks each array's dtype before using it.

It imports NumPy and the standard library only: the grading child loads it by file path (:mod:`.worker`).
"""

from __future__ import annotations

import io
import json
import os
import struct

import numpy as np

#: the largest frame either side accepts (a child sending more is a broken child)
MAX_FRAME = 1 << 31

_LEN = struct.Struct(">Q")


class WireError(Exception):
    """A frame that is not a well-formed message (truncated, too big, an array of objects)."""


def _flatten(obj, arrays):
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise WireError(f"an array of dtype {obj.dtype} cannot be sent (numeric and boolean only)")
        arrays.append(obj)
        return {"__nd__": len(arrays) - 1}
    if isinstance(obj, dict):
        return {"__dict__": [[str(k), _flatten(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_flatten(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_flatten(v, arrays) for v in obj]
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise WireError(f"a {type(obj).__name__} cannot be sent (plain data and arrays only)")


def _build(obj, arrays):
    if isinstance(obj, list):
        return [_build(v, arrays) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"__nd__"}:
            return arrays[int(obj["__nd__"])]
        if set(obj) == {"__tuple__"}:
            return tuple(_build(v, arrays) for v in obj["__tuple__"])
        if set(obj) == {"__dict__"}:
            return {str(k): _build(v, arrays) for k, v in obj["__dict__"]}
        raise WireError("malformed message")
    return obj


def encode(obj):
    """The frame of ``obj`` (bytes)."""
    arrays = []
    header = json.dumps(_flatten(obj, arrays)).encode("utf-8")
    blobs = []
    for a in arrays:
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        blobs.append(buf.getvalue())
    body = _LEN.pack(len(header)) + header + b"".join(_LEN.pack(len(b)) + b for b in blobs)
    return _LEN.pack(len(body)) + body


def decode(body):
    """The message in the frame body ``body`` (the bytes after the frame's length)."""
    try:
        (n,) = _LEN.unpack_from(body, 0)
        header = json.loads(body[8:8 + n].decode("utf-8"))
        pos, arrays = 8 + n, []
        while pos < len(body):
            (m,) = _LEN.unpack_from(body, pos)
            a = np.load(io.BytesIO(body[pos + 8:pos + 8 + m]), allow_pickle=False)
            if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":
                raise WireError("an array that is not numeric")
            arrays.append(a)
            pos += 8 + m
        return _build(header, arrays)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a broken frame makes the parsers raise
        raise WireError(f"malformed message ({type(exc).__name__}: {exc})") from None


def send(fd, obj, wait=None):
    """Write ``obj``'s frame to the file descriptor ``fd``; ``wait()`` blocks until ``fd`` is writable
    (raising on a deadline), then at most a pipe's buffer is written at a time."""
    data = memoryview(encode(obj))
    while data:
        if wait is not None:
            wait()
        n = os.write(fd, data[:1 << 16] if wait is not None else data)
        data = data[n:]


def read_exactly(fd, n, wait=None):
    """``n`` bytes from ``fd``; None at end of file. ``wait(remaining)`` blocks until ``fd`` is readable
    (raising on a deadline)."""
    chunks, got = [], 0
    while got < n:
        if wait is not None:
            wait()
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd, wait=None):
    """The next message from ``fd``; None when the other side closed it."""
    head = read_exactly(fd, 8, wait)
    if head is None:
        return None
    (n,) = _LEN.unpack(head)
    if n > MAX_FRAME:
        raise WireError(f"a frame of {n} bytes (more than {MAX_FRAME})")
    body = read_exactly(fd, n, wait)
    if body is None:
        return None
    return decode(body)
