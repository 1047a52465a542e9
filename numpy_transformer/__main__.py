"""``python -m numpy_transformer``: the command line (``cli.main``).

Ctrl-C while the command's modules load prints ``interrupted while starting up, nothing done`` (exit
130), here for the CLI's own import and in ``cli.main`` for the command's. The package's
``__init__`` imports nothing but the standard library's ``importlib``, ``sys``, ``types`` and
``typing`` (every public name loads on first use), so the only moments left unguarded are the
interpreter's own start-up and those few milliseconds.
"""

import sys

STARTING_UP = "interrupted while starting up, nothing done"

try:
    from .cli import main
except KeyboardInterrupt:                  # Ctrl-C while the command's modules load: nothing done yet
    print(STARTING_UP, file=sys.stderr)
    sys.exit(130)

sys.exit(main())
