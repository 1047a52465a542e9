"""Training: the configuration (``TrainConfig``), the :class:`~.trainer.Trainer`, the
evaluation loop, the model kinds of ``--model`` (:mod:`.kinds`), the checkpoint
format (:mod:`.checkpoint`, its files and validation), the run log (:mod:`.runlog`).
"""

from ..utils.lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, globals())
