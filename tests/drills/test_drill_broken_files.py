"""Broken submissions (syntax error, missing function, wrong arity, exceptions, infinite loops, exits,
in-place changes of an input, unreadable files) are reported, never crash the grader, and give a non-zero
exit status.
"""

from __future__ import annotations

import re
import time

import numpy_transformer.drills as drills
from tests.drills.drill_helpers import (
    SOFTMAX_OK_FORWARD,
    assert_reported,
    check,
    solution_source,
    write,
)

# --------------------------------------------------------------------------------------------------
# broken files: reported, never a crash, non-zero exit
# --------------------------------------------------------------------------------------------------


def test_syntax_error(tmp_path):
    rc, out = check(write(tmp_path, "# drill: softmax\ndef softmax_forward(x)\n    return x, x\n"))
    assert_reported(rc, out, 2, "syntax error, line 2")


def test_no_function_of_the_exercise(tmp_path):
    rc, out = check(write(tmp_path, "# drill: softmax\ndef softmax_fwd(x):\n    return x, x\n"))
    assert_reported(rc, out, 2, "defines none of the 'softmax' functions", "did you mean 'softmax_forward'")


def test_missing_backward_grades_the_forward(tmp_path):
    rc, out = check(write(tmp_path, SOFTMAX_OK_FORWARD))
    assert_reported(rc, out, 1, "softmax_backward is not defined in your file", "not defined in your file")
    assert re.search(r"y +softmax_forward +12/12 +PASS", out), out


def test_forward_without_cache(tmp_path):
    src = SOFTMAX_OK_FORWARD.replace("return y, y", "return y") + "def softmax_backward(dy, c):\n    return dy\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "softmax_forward must return (y, cache); it returned an ndarray of shape")


def test_wrong_backward_arity(tmp_path):
    src = solution_source("layer_norm").replace("return dx, dgamma, dbeta", "return dx, dgamma")
    rc, out = check(write(tmp_path, src, "layer_norm.py"))
    assert_reported(rc, out, 1,
                    "layer_norm_backward must return 3 values (dx, dgamma, dbeta); it returned a tuple of 2")
    assert re.search(r"y +layer_norm_forward +12/12 +PASS", out), out


def test_missing_return(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    dx = dy * cache\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "returned None")


def test_exception_points_at_the_users_line(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    return dy @ cache @ cache\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "softmax_backward raised ValueError", "your line 8: `return dy @ cache @ cache`")


def test_not_implemented_skeleton(tmp_path):
    path = drills.start("softmax", str(tmp_path))
    rc, out = check(path)
    assert_reported(rc, out, 1, "softmax_forward is not implemented yet", "score: 0/24 checks passed")


def test_infinite_loop_in_a_function(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    while True:\n        pass\n"
    t0 = time.time()
    rc, out = check(write(tmp_path, src), "--call-timeout", "0.5", cases=4)
    assert_reported(rc, out, 1, "softmax_backward did not return within 0.5 s", "timed out on an earlier case")
    assert time.time() - t0 < 30


def test_whole_run_time_limit(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    while True:\n        pass\n"
    rc, out = check(write(tmp_path, src), "--call-timeout", "0", "--timeout", "3", cases=4)
    assert_reported(rc, out, 1, "grading stopped during case 1: it ran past the time limit of 3 s")


def test_module_level_infinite_loop(tmp_path):
    rc, out = check(write(tmp_path, SOFTMAX_OK_FORWARD + "while True:\n    pass\n"), "--call-timeout", "1")
    assert_reported(rc, out, 2, "importing the file did not finish within 1 s")


def test_sys_exit_at_import(tmp_path):
    rc, out = check(write(tmp_path, "import sys\n" + SOFTMAX_OK_FORWARD + "sys.exit(3)\n"))
    assert_reported(rc, out, 2, "importing the file raised SystemExit: 3")


def test_exception_at_import(tmp_path):
    rc, out = check(write(tmp_path, SOFTMAX_OK_FORWARD + "x = undefined_name + 1\n"))
    assert_reported(rc, out, 2, "importing the file raised NameError", "your line 7")


def test_hard_exit_inside_a_function(tmp_path):
    src = "import os\n" + SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    os._exit(7)\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "exited unexpectedly during case 1 (exit status 7)")


def test_sys_exit_inside_a_function_is_an_ordinary_failure(tmp_path):
    src = "import sys\n" + SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    sys.exit('bye')\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "softmax_backward raised SystemExit: bye")


def test_wrong_types_and_shapes(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    return 'dx'\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "is not numeric")
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    return np.stack([dy, dy])\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "wrong shape: shape")


def test_in_place_modification_of_an_input_fails(tmp_path):
    """`x -= x.max(...)` changes the caller's array: a FAIL naming the argument, though every value is right."""
    src = ("import numpy as np\ndef softmax_forward(x):\n    x -= x.max(axis=-1, keepdims=True)\n"
           "    e = np.exp(x)\n    y = e / e.sum(axis=-1, keepdims=True)\n    return y, y\n"
           "def softmax_backward(dy, y):\n    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))\n")
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "FAIL: softmax_forward modified its input `x` in place",
                    "12 case(s) modified an input in place", "-> FAIL")
    # changing its own cache in the backward is the function's business: a note, not a failure
    src = ("import numpy as np\ndef softmax_forward(x):\n    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
           "    y = e / e.sum(axis=-1, keepdims=True)\n    return y, y.copy()\n"
           "def softmax_backward(dy, y):\n    y *= dy - (dy * y).sum(axis=-1, keepdims=True)\n    return y\n")
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 0, "note: softmax_backward modified its argument `y` (its own cache) in place")


def test_unreadable_files(tmp_path):
    rc, out = check(tmp_path / "nope.py")
    assert_reported(rc, out, 2, "no such file")
    rc, out = check(tmp_path)
    assert_reported(rc, out, 2, "is a directory")
    bad = tmp_path / "bin.py"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    rc, out = check(bad)
    assert_reported(rc, out, 2, "not UTF-8")
    empty = tmp_path / "empty.py"
    empty.write_text("")
    rc, out = check(empty)
    assert_reported(rc, out, 2, "cannot tell which exercise")


def test_printing_code_is_graded(tmp_path):
    src = SOFTMAX_OK_FORWARD.replace("return y, y", "print('debug', y.shape)\n    return y, y") + \
        "def softmax_backward(dy, y):\n    print('bwd')\n    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))\n"
    rc, out = check(write(tmp_path, src), "--show-output")
    assert_reported(rc, out, 0, "debug (1, 1)")
