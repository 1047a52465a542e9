"""``python -m reference_torch.check``: the checker's command line (:func:`reference_torch.check.checker.main`).

Ctrl-C prints one line and exits with status 130: ``interrupted while starting up, nothing done`` while
torch and the registry load (``reference_torch/__init__.py`` handles that moment), ``interrupted; the
check stopped before its report`` while it compares.
"""

import signal
import sys

from .checker import main

INTERRUPTED = "interrupted; the check stopped before its report"

signal.signal(signal.SIGINT, signal.default_int_handler)          # from here on, Ctrl-C is KeyboardInterrupt
try:
    status = main()
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    status = 130
sys.exit(status)
