"""The README's Python block runs, so the front page cannot drift from the package."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
