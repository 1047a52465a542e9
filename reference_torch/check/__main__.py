"""``python -m reference_torch.check``: the checker's command line (:func:`reference_torch.check.checker.main`)."""

import sys

from .checker import main

sys.exit(main())
