"""A check file, module form: ``nt.Linear`` against ``torch.nn.Linear`` (weights copied by state_dict name).

    python -m numpy_transformer check docs/examples/check_linear_module.py
"""

import numpy as np
import torch

import numpy_transformer as nt


def our_module():
    return nt.Linear(8, 4, dtype=np.float64, seed=0)


def torch_module():
    return torch.nn.Linear(8, 4, dtype=torch.float64)


def inputs():
    return (np.random.default_rng(1).standard_normal((3, 5, 8)),)
