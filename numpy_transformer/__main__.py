import sys

try:
    from .cli import main
except KeyboardInterrupt:                  # Ctrl-C while the command's modules load: nothing done yet
    print("interrupted while starting up, nothing done", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
