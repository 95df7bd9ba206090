"""docs/spec-coverage.md names Python tests (`py/<file>::<test>`, and further bare test
names of the same file after it): every one it names exists, so the coverage the document
claims is coverage the suite has."""

import pathlib
import re
from typing import List, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[2]
COVERAGE = ROOT / "docs" / "spec-coverage.md"
TESTS = ROOT / "tests" / "python"


def named_python_tests(text: str) -> List[Tuple[str, str]]:
    """(file, test) for every Python test a table row of `text` names."""
    named = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        current: Optional[str] = None
        for token in re.findall(r"`([^`]+)`", line):
            qualified = re.match(r"py/(test_\w+)::(\w+|\*)$", token)
            if qualified:
                current = qualified.group(1)
                if qualified.group(2) != "*":
                    named.append((current, qualified.group(2)))
            elif "::" in token:
                current = None
            elif current is not None and re.match(r"test_\w+$", token):
                named.append((current, token))
    return named


def test_every_python_test_the_coverage_names_exists() -> None:
    named = named_python_tests(COVERAGE.read_text())
    assert len(named) > 200, "the coverage document names the Python tests"
    missing = [
        f"{file}::{test}"
        for file, test in named
        if not (TESTS / f"{file}.py").exists()
        or not re.search(rf"^(async )?def {test}\(", (TESTS / f"{file}.py").read_text(), re.M)
    ]
    assert missing == []


def test_a_misnamed_test_would_be_found() -> None:
    row = "| rule | `py/test_numpy::test_an_empty_array_has_no_tensor`, `test_no_such_test` |"
    assert named_python_tests(row) == [
        ("test_numpy", "test_an_empty_array_has_no_tensor"),
        ("test_numpy", "test_no_such_test"),
    ]
