"""Signals that stop a training run: Ctrl-C (SIGINT), ``kill`` and schedulers (SIGTERM), a closed
terminal (SIGHUP). Each becomes a :class:`KeyboardInterrupt`, so one ``except KeyboardInterrupt``
saves the run whichever of them arrived.

* :func:`interrupt_signals` (the ``train`` command, for the run's duration): SIGTERM and SIGHUP raise
  :class:`Interrupted` as Ctrl-C raises KeyboardInterrupt; the previous handlers come back after.
  A signal the caller ignores (``nohup`` ignores SIGHUP) stays ignored.
* :func:`deferred_interrupts` (``Trainer.train``): a signal that would raise is noted and raised after
  the current step, so training always stops between two steps; a second one raises at once, except
  inside the optimizer update.
* :func:`signals_blocked` (around a checkpoint save): the signals wait until the file is written,
  then arrive; a save is never cut short by them.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator

__all__ = ["Interrupted", "INTERRUPT_SIGNALS", "interrupt_signals", "deferred_interrupts", "signals_blocked",
           "signal_name", "signum_of", "exit_status"]

INTERRUPT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt that knows which signal caused it (``signum``)."""

    def __init__(self, signum: int, message: str | None = None):
        super().__init__(message or signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    """``signal.SIGTERM`` -> ``"SIGTERM"``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def signum_of(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: its ``signum``, else SIGINT (Python's own Ctrl-C)."""
    return getattr(exc, "signum", signal.SIGINT)


def exit_status(exc: BaseException) -> int:
    """The shell's status for a process stopped by ``exc``'s signal: 128 + signal number (Ctrl-C: 130)."""
    return 128 + int(signum_of(exc))


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _raises(handler):
    """Whether ``handler`` turns its signal into a KeyboardInterrupt (so deferring it is safe)."""
    return handler is signal.default_int_handler or handler is _raise_interrupted


def _main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def interrupt_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Interrupted` inside the block (as Ctrl-C raises
    KeyboardInterrupt); ignored signals stay ignored; the previous handlers are restored after.
    Outside the main thread (where no handler can be installed) it changes nothing."""
    previous = {}
    if _main_thread():
        for signum in INTERRUPT_SIGNALS:
            if signum == signal.SIGINT:
                continue                                  # Python's default handler raises already
            handler = signal.getsignal(signum)
            if handler in (signal.SIG_DFL, None):         # default: the process dies with no checkpoint
                previous[signum] = signal.signal(signum, _raise_interrupted)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred_interrupts(busy: Callable[[], bool] = lambda: False) -> Iterator["_Deferral"]:
    """Inside the block, each interrupt signal whose handler raises KeyboardInterrupt is only noted:
    the context's ``requested()`` turns true and ``check(step)`` raises :class:`Interrupted` (call it
    between steps). A second signal raises at once unless ``busy()`` (the optimizer update)."""
    state = _Deferral()
    previous = {}
    if _main_thread():
        def on_signal(signum, frame):
            if state.signum is not None and not busy():
                raise Interrupted(signum, "interrupted during a step")
            state.signum = signum

        for signum in INTERRUPT_SIGNALS:
            if _raises(signal.getsignal(signum)):
                previous[signum] = signal.signal(signum, on_signal)
    try:
        yield state
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Deferral:
    signum = None

    def requested(self):
        return self.signum is not None

    def check(self, step):
        if self.signum is not None:
            raise Interrupted(self.signum, f"interrupted after step {step}")


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold the interrupt signals back (``pthread_sigmask``) for the block; one that arrived meanwhile
    is delivered when it ends (so it raises just after the block). Main thread only; elsewhere, or
    without ``pthread_sigmask``, it changes nothing."""
    if not (_main_thread() and hasattr(signal, "pthread_sigmask")):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPT_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
