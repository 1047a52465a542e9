"""The bottom layer: argument validation (:mod:`.checks`) and text width and wrapping
(:mod:`.text`). Imports nothing of the package.
"""

from .lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, globals())
