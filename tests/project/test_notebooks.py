"""The notebooks of ``notebooks/`` are lessons that must keep running: each is executed here, top to
bottom, in a fresh kernel, as a reader would run it.

How they run: nbclient starts the kernel named ``python3``, which is ipykernel's own kernel of the Python
running the tests (jupyter_client runs a kernel spec's ``python3`` command as ``sys.executable``), so a
fresh clone with the ``dev`` or ``test`` extra installed (``scripts/setup_venv.sh``) needs no
``ipykernel install``. The kernel starts in ``notebooks/`` (where Jupyter starts it when the notebook is
opened) with this checkout first on ``PYTHONPATH``, so it is this checkout's code that the notebooks run;
they write only into temporary folders.

Timing, wall seconds with the kernel's start, measured on this project's shared 2-core machine at load
average ~20 (CPU seconds in brackets): 01 7-10 s, 02 34-58 s (22-28), 03 172 s (32), 04 75 s (12, most
of it importing transformers and torch). Together they are far above the ~60-90 s the default suite can
spare, so only 01, the fastest, runs by default; the others are marked ``slow`` (``pytest -m slow
tests/project/test_notebooks.py`` runs them).
"""

from __future__ import annotations

import json
import os

import pytest
from _paths import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
CELL_TIMEOUT_S = 600                # one cell; the longest (a training run) takes well under this

#: every notebook -> (whether it runs in the default suite (False: marked slow), what it needs besides NumPy)
NOTEBOOKS = {
    "01_attention_by_hand.ipynb": (True, ()),                  # torch optional: a cell says it is missing
    "02_gpt_on_text.ipynb": (False, ("matplotlib",)),
    "03_seed_design_ablation.ipynb": (False, ("matplotlib",)),
    "04_hugging_face.ipynb": (False, ("safetensors", "torch", "transformers")),
}


def _param(name):
    default, requires = NOTEBOOKS[name]
    return pytest.param(name, requires, id=name.split("_")[0], marks=() if default else pytest.mark.slow)


def test_every_notebook_is_listed():
    """A notebook added to ``notebooks/`` without an entry here would never be executed."""
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_is_stored_without_outputs(name):
    """Outputs belong to the reader's run, not to the repository: no outputs, no execution counts."""
    nb = json.loads((NOTEBOOK_DIR / name).read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, f"{name} has no code cell"
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{name}: cell {i} is stored with outputs"
            assert cell["execution_count"] is None, f"{name}: cell {i} is stored with an execution count"


@pytest.mark.parametrize(("name", "requires"), [_param(n) for n in sorted(NOTEBOOKS)])
def test_notebook_runs_top_to_bottom(name, requires, monkeypatch):
    """Every cell runs without an error in a fresh kernel (a failed ``assert`` in a cell fails it too)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for module in ("ipykernel", *requires):
        pytest.importorskip(module)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()                 # raises CellExecutionError naming the cell and its traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
