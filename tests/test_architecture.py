"""docs/architecture.md's layer table is true to the code: every module of src/kb sits in one
layer, the counts of files and lines hold, and no import points up a layer or around a loop.
And no two modules of src/kb share a file name."""

from __future__ import annotations

import ast
import graphlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "kb"
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Layer:
    name: str
    entries: tuple[str, ...]  # "dir/" for a folder, else a module path without ".py"
    files: int
    lines: int


def layers() -> list[Layer]:
    """The rows of the doc's layer table, top layer first."""
    text = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([a-z, ]+) \| (.+?) \| ([\d,]+) \| ([\d,]+) \|$", text, re.MULTILINE)
    return [
        Layer(
            name,
            # What a row says in parentheses describes its entry; it names no module.
            tuple(re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", modules))),
            int(files.replace(",", "")),
            int(lines.replace(",", "")),
        )
        for name, modules, files, lines in rows
    ]


def module_key(path: Path) -> str:
    return path.relative_to(SOURCE).with_suffix("").as_posix().removesuffix("/__init__")


MODULES = {module_key(p): p for p in sorted(SOURCE.rglob("*.py"))}
# The files every package may have, whose name says what they are, not what they do.
PACKAGE_FILES = {"__init__.py", "__main__.py"}


def layer_of(module: str, table: list[Layer]) -> int | None:
    """The row a module is in: the one naming it, else the one naming its closest folder."""
    best: tuple[int, int] | None = None  # (row, how specific)
    for row, layer in enumerate(table):
        for entry in layer.entries:
            if entry == module:
                return row
            folder = entry.endswith("/") and f"{module}/".startswith(entry)
            if folder and (best is None or len(entry) > best[1]):
                best = (row, len(entry))
    return None if best is None else best[0]


def shared_names(root: Path) -> dict[str, list[str]]:
    """The file names that two modules or more under `root` have, each with their paths."""
    paths: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name not in PACKAGE_FILES:
            paths.setdefault(path.name, []).append(path.relative_to(root).as_posix())
    return {name: found for name, found in paths.items() if len(found) > 1}


def runtime_imports(path: Path) -> Iterator[str]:
    """The kb modules a module imports when it runs (at its top or inside a function), not
    those it names for the type checker alone."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kb"):
            base = node.module.removeprefix("kb").lstrip(".").replace(".", "/")
            for alias in node.names:
                # `from kb.store import documents` imports a module; `from kb.store import Store`
                # a name of the package.
                named = f"{base}/{alias.name}".lstrip("/")
                yield named if named in MODULES else base
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kb."):
                    yield alias.name.removeprefix("kb.").replace(".", "/")


def test_every_module_sits_in_one_layer_and_the_counts_hold() -> None:
    table = layers()
    assert [layer.name for layer in table][:2] == ["faces", "composition"]
    files: Counter[int] = Counter()
    lines: Counter[int] = Counter()
    unplaced = []
    for module, path in MODULES.items():
        row = layer_of(module, table)
        if row is None:
            unplaced.append(module)
            continue
        files[row] += 1
        lines[row] += len(path.read_text(encoding="utf-8").splitlines())
    assert not unplaced, f"modules in no layer of docs/architecture.md: {unplaced}"
    for row, layer in enumerate(table):
        assert files[row] == layer.files, (
            f"{layer.name}: {files[row]} files, the doc says {layer.files}"
        )
        assert abs(lines[row] - layer.lines) <= layer.lines / 10, (
            f"{layer.name}: {lines[row]} lines, the doc says {layer.lines}"
        )


def test_no_import_points_up_a_layer() -> None:
    table = layers()
    upward = [
        f"{module} ({table[row].name}) imports {target} ({table[to].name})"
        for module, path in MODULES.items()
        if (row := layer_of(module, table)) is not None
        for target in runtime_imports(path)
        if (to := layer_of(target, table)) is not None and to < row
    ]
    assert not upward


def test_no_modules_import_each_other_around_a_loop() -> None:
    graph = {
        module: {t for t in runtime_imports(path) if t in MODULES and t != module}
        for module, path in MODULES.items()
    }
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as loop:
        raise AssertionError(f"an import loop: {' -> '.join(loop.args[1])}") from None


def test_no_two_modules_share_a_file_name() -> None:
    """A module's file name says its job, once: `status.py` is the command or the report,
    never both, so a name in a traceback, an import or a file search finds one module."""
    assert shared_names(SOURCE) == {}


def test_a_file_name_two_modules_share_is_found(tmp_path: Path) -> None:
    """What the check above rests on: the whole tree is walked, and only a package's own
    files may repeat."""
    for module in (
        "__main__.py",
        "cli/__init__.py",
        "cli/status.py",
        "store/__init__.py",
        "store/state.py",
        "services/status.py",
        "services/deeper/state.py",
    ):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).touch()
    assert shared_names(tmp_path) == {
        "state.py": ["services/deeper/state.py", "store/state.py"],
        "status.py": ["cli/status.py", "services/status.py"],
    }


def test_imports_are_read_as_they_run(tmp_path: Path) -> None:
    """What the checks above rest on: a function's import counts, a module named in a
    `from` import is that module, and what only the type checker reads does not count."""
    module = tmp_path / "example.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from kb.store import documents, Store\n"
        "if TYPE_CHECKING:\n"
        "    from kb.web.routes import Parts\n"
        "def later():\n"
        "    from kb.web.routes import web_app\n"
        "    import kb.search.hybrid\n",
        encoding="utf-8",
    )
    imported = list(runtime_imports(module))
    assert imported == ["store/documents", "store", "web/routes", "search/hybrid"]
    table = [Layer("faces", ("web/",), 0, 0), Layer("composition", ("container", "web/x"), 0, 0)]
    modules = ("web/routes", "web/x", "container", "cli")
    assert [layer_of(m, table) for m in modules] == [0, 1, 1, None]
