"""The manual (``README.md`` and the pages of ``docs/``) against the command line it documents: no
leftover placeholders, every command the real ``dsh-workflow --help`` lists is documented, and every
extra the manual tells a user to install exists (also from a clone, ``pip install '.[ui]'``)."""

from __future__ import annotations

import itertools
import re
import tomllib

from _support import REPO, run_cli

#: The manual's files: the README first, then docs/ (one page per topic).
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MANUAL = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def _help() -> str:
    done = run_cli("--help", timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_placeholders_are_left_in_the_readme() -> None:
    for marker in ("_LOCAL", "TODO", "XXX", "TBD", "FIXME"):
        for page in PAGES:
            assert marker not in page.read_text(encoding="utf-8"), f"{page.name} still holds {marker!r}"
    for line in MANUAL.splitlines():
        if line.startswith("|"):  # a table row: no cell repeats its neighbour with a suffix
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            for left, right in itertools.pairwise(cells):
                assert not (left and right != left and right.startswith(left)
                            and re.fullmatch(r"_?[A-Z_]+", right[len(left):])), line


def test_every_command_in_help_is_documented() -> None:
    commands = re.findall(r"^    ([a-z][a-z-]*)\s{2,}\S", _help(), re.M)
    assert {"run", "check", "runs", "show", "logs", "resume", "ui", "mcp"} <= set(commands)
    for command in commands:
        assert f"dsh-workflow {command}" in MANUAL, f"the manual never shows `dsh-workflow {command}`"
    assert "dsh-workflow --version" in MANUAL


def test_every_extra_the_readme_names_exists_and_a_clone_install_is_shown() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]
    named = set(re.findall(r"pip install '(?:dsh-workflow|\.)\[([a-z-]+)\]'", MANUAL))
    assert {"ui", "mcp", "temporal"} <= named
    assert named <= set(extras), named - set(extras)
    assert "pip install '.[ui]'" in MANUAL  # from a clone: the package is not on an index
