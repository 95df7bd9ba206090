"""The README's Python block and the Python guide's quick start run, so neither can drift from
the package."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
GUIDE = README.parent / "docs" / "python.md"


def test_readme_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_the_python_guides_quick_start_runs() -> None:
    section = GUIDE.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(GUIDE), "exec"), {})
