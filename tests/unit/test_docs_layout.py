"""The manual's shape (SPEC §22): a short ``README.md`` (set-up, one example, the fast test loop,
where to read on) and the manual in ``docs/``, one page per topic, indexed by ``docs/README.md``;
every relative link in them points to a file (and a heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"

#: About 200 lines, with a little room; the manual's detail belongs in docs/.
MAX_README_LINES = 220

#: The set-up commands CI's ``.ci/run`` mirrors; they stay in the README, word for word.
SETUP_COMMANDS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && dsh-workflow run examples/code-review.js",
    "python3 -m venv .venv && . .venv/bin/activate && pip install '.[test]' && "
    "python -m pytest -q -n 2 --dist worksteal",
)

_FENCE = re.compile(r"^ *```.*?^ *```", re.M | re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a link inside one is an example, not a link)."""
    return _FENCE.sub("", text)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_short_and_keeps_the_set_up_commands_and_the_fast_loop() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; the manual's detail goes in docs/"
    for command in SETUP_COMMANDS:
        assert command in text, f"README.md lost the set-up command {command!r}"
    assert "python -m pytest -q tests/unit" in text, "README.md must name the fast test loop"
    assert "docs/README.md" in text and "ARCHITECTURE.md" in text and "SECURITY.md" in text


def test_docs_exists_with_an_index_that_links_every_page() -> None:
    index = DOCS / "README.md"
    assert index.is_file(), "docs/README.md, the manual's index, is missing"
    linked = {target.split("#", 1)[0] for target in _LINK.findall(_prose(index.read_text(encoding="utf-8")))}
    pages = {page.name for page in DOCS.glob("*.md")} - {"README.md"}
    assert len(pages) >= 8, sorted(pages)
    assert pages <= linked, f"docs/README.md does not link {sorted(pages - linked)}"


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_points_to_an_existing_file_and_heading(page: Path) -> None:
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not a file of this repository
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.relative_to(REPO)} links {target!r}, which does not exist"
        assert REPO in file.parents or file == REPO, f"{page.relative_to(REPO)} links outside the repository"
        if anchor and file.suffix == ".md":
            anchors = {_anchor(h) for h in _HEADING.findall(_prose(file.read_text(encoding="utf-8")))}
            assert anchor in anchors, f"{page.relative_to(REPO)} links {target!r}: no such heading"


_LAYOUT_ROW = re.compile(r"^\| `([^`]+)`(.*)$", re.M)


def _layout_rows() -> list[tuple[str, str]]:
    """``docs/layout.md``'s table as (folder the row speaks of, the row's text)."""
    rows = []
    for path, rest in _LAYOUT_ROW.findall((DOCS / "layout.md").read_text(encoding="utf-8")):
        folder = path if path.endswith("/") else path.rpartition("/")[0] + "/"
        rows.append((folder, f"`{path}`{rest}"))
    return rows


def _modules() -> list[str]:
    """Every module of the package and every file of ``runtime_js/``, as paths from the repository."""
    package = sorted((REPO / "dsh_workflow").rglob("*.py"))
    runtime = sorted((REPO / "runtime_js").glob("*.js"))
    return [path.relative_to(REPO).as_posix() for path in [*package, *runtime]]


def _named_in_layout(module: str, rows: list[tuple[str, str]]) -> bool:
    """Whether the layout rows of ``module``'s nearest folder name it (``name.py``, ``sub/name.py``).

    A package's ``__init__.py`` is named by a row for its folder (or its own path)."""
    folder, _, name = module.rpartition("/")
    folder += "/"
    rows = [(row_folder, text) for row_folder, text in rows if folder.startswith(row_folder)]
    if not rows:
        return False
    deepest = max(len(row_folder) for row_folder, _ in rows)
    texts = [text for row_folder, text in rows if len(row_folder) == deepest]
    if name == "__init__.py" and module != "dsh_workflow/__init__.py":
        if deepest == len(folder):
            return True
        package = folder[deepest:]  # e.g. "mcp/", named in its parent folder's row
        named = re.compile(r"`" + re.escape(package))
    else:
        named = re.compile(r"[`/]" + re.escape(name) + "`")
    return any(named.search(text) for text in texts)


def test_the_layout_page_names_every_module() -> None:
    """SPEC §28: ``docs/layout.md`` lists every module and every file of ``runtime_js/``."""
    rows = _layout_rows()
    missing = [module for module in _modules() if not _named_in_layout(module, rows)]
    assert not missing, f"docs/layout.md does not name {missing}"


def test_the_layout_check_finds_a_module_the_page_does_not_name() -> None:
    rows = _layout_rows()
    assert _named_in_layout("dsh_workflow/_store/writes.py", rows)
    assert not _named_in_layout("dsh_workflow/_store/unlisted.py", rows)
    assert not _named_in_layout("dsh_workflow/_unlisted.py", rows)
    assert not _named_in_layout("runtime_js/unlisted.js", rows)
