"""The messages between ``drill check`` and its grading child: plain JSON and plain arrays, nothing else.

A message is a nested structure of dicts (string keys), lists, tuples, ``None``, booleans, numbers,
strings and NumPy arrays of a numeric or boolean dtype. On the wire it is one frame: an 8-byte length,
then a JSON header (the structure, each array replaced by ``{"__nd__": k}``, and each array's dtype
string and shape) and each array's raw bytes (C order). No object crosses, so nothing the child sends can
run code in the parent: an array is rebuilt from its bytes only when its dtype is a plain numeric or
boolean one (no objects, no fields) and its byte count is its shape's. (Raw bytes rather than ``.npy``
files: parsing an ``.npy`` header for each of a few thousand small arrays cost more than the check.)

It imports NumPy and the standard library only: the grading child loads it by file path (:mod:`.worker`).
"""

from __future__ import annotations

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
    flat = _flatten(obj, arrays)
    blobs = [a if a.flags.c_contiguous else a.copy(order="C") for a in arrays]
    header = json.dumps({"obj": flat, "arrays": [[b.dtype.str, list(b.shape)] for b in blobs]}).encode("utf-8")
    body = b"".join([_LEN.pack(len(header)), header] + [part for b in blobs for part in (_LEN.pack(b.nbytes),
                                                                                        b.tobytes())])
    return _LEN.pack(len(body)) + body


def _array(meta, blob):
    """The array of ``meta`` (``[dtype string, shape]``) from its bytes ``blob``, after checking both."""
    descr, shape = meta
    dtype = np.dtype(str(descr))
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise WireError("an array that is not numeric")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                              for n in shape):
        raise WireError("malformed message (an array's shape)")
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(blob):
        raise WireError("malformed message (an array's size)")
    return np.frombuffer(blob, dtype=dtype).reshape(shape).copy()


def decode(body):
    """The message in the frame body ``body`` (the bytes after the frame's length)."""
    try:
        (n,) = _LEN.unpack_from(body, 0)
        header = json.loads(body[8:8 + n].decode("utf-8"))
        metas = header["arrays"]
        pos, arrays = 8 + n, []
        while pos < len(body):
            (m,) = _LEN.unpack_from(body, pos)
            if len(arrays) >= len(metas) or pos + 8 + m > len(body):
                raise WireError("malformed message (an array too many, or truncated)")
            arrays.append(_array(metas[len(arrays)], body[pos + 8:pos + 8 + m]))
            pos += 8 + m
        if len(arrays) != len(metas):
            raise WireError("malformed message (an array missing)")
        return _build(header["obj"], arrays)
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
