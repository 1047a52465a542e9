"""Every ```python block of the README runs as written, in order, in one session (later blocks use
what earlier ones defined, as a reader typing them into one interpreter would): a feature is done when
a user can run it from the README."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    assert len(BLOCKS) >= 5
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "__readme__"}
    for i, code in enumerate(BLOCKS):
        exec(compile(code, f"README.md python block {i}", "exec"), ns)
    assert ns["llama"].config.modern and ns["out"] is not None
