"""The README's list of exit codes is the one the command uses: every code, the outcomes behind code 3."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.cli import terminal
from orchestrator.reporting.outcomes import OUTCOMES

README = Path(__file__).resolve().parents[2] / "README.md"


def _documented() -> dict[int, str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("The exit codes are:"):]
    section = section[:section.index("\n\n", section.index("- 0:"))]
    items = re.split(r"^- (\d+): ", section, flags=re.M)[1:]
    return {int(code): " ".join(body.split()) for code, body in zip(items[::2], items[1::2], strict=True)}


def test_every_exit_code_is_documented():
    codes = {value for name, value in vars(terminal).items() if name.startswith("EXIT_")}
    assert codes == {0, 1, 2, 3, 4, 130, 141}
    assert set(_documented()) == codes


def test_code_3_names_strict_and_every_outcome():
    strict = _documented()[3]
    assert "--strict" in strict and "outputs.fail_on" in strict
    assert all(f"`{name}`" in strict for name in OUTCOMES)
