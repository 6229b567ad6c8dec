"""docs/architecture.md's layer table is true to the code: every module of src/kb sits in one
layer, the counts of files and lines hold, and no import points up a layer or around a loop.
The folders show the layers: each sits whole in one row, and no two folders import each other.
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
    entries: tuple[str, ...]  # "dir/" for a folder, else a top-level module without ".py"
    files: int
    lines: int


def layers() -> list[Layer]:
    """The rows of the doc's layer table, top layer first."""
    return parse_layers(DOC.read_text(encoding="utf-8"))


def parse_layers(text: str) -> list[Layer]:
    """The rows of a layer table: every name a row's modules cell puts in backticks is an
    entry, in brackets or not."""
    rows = re.findall(r"^\| ([a-z, ]+) \| (.+?) \| ([\d,]+) \| ([\d,]+) \|$", text, re.MULTILINE)
    return [
        Layer(
            name,
            tuple(re.findall(r"`([^`]+)`", modules)),
            int(files.replace(",", "")),
            int(lines.replace(",", "")),
        )
        for name, modules, files, lines in rows
    ]


def module_key_in(path: Path, root: Path) -> str:
    return path.relative_to(root).with_suffix("").as_posix().removesuffix("/__init__")


def module_key(path: Path) -> str:
    return module_key_in(path, SOURCE)


MODULES = {module_key(p): p for p in sorted(SOURCE.rglob("*.py"))}
# The files every package may have, whose name says what they are, not what they do.
PACKAGE_FILES = {"__init__.py", "__main__.py"}


def folder_of(module: str, root: Path = SOURCE) -> str:
    """The folder a module sits in ("store/" for `store/documents` and for the `store`
    package itself), or the module itself when it sits at the top of `root`."""
    top = module.split("/")[0]
    return f"{top}/" if (root / top).is_dir() else module


def layer_of(module: str, table: list[Layer], root: Path = SOURCE) -> int | None:
    """The row a module is in: the one naming its folder (or, at the top, the module)."""
    place = folder_of(module, root)
    return next((row for row, layer in enumerate(table) if place in layer.entries), None)


def misplaced(table: list[Layer], root: Path = SOURCE) -> list[str]:
    """What breaks "one folder per row": an entry that is not a folder of `root` or a module
    at its top (a module inside a folder, named to put it in a row its folder is not in), and
    a folder or top-level module named by no row or by two."""
    places = {folder_of(module_key_in(p, root), root) for p in root.rglob("*.py")}
    named = Counter(entry for layer in table for entry in layer.entries)
    return sorted(
        [f"{e} names no folder or top-level module" for e in named if e not in places]
        + [f"{place} is named by {named[place]} rows" for place in places if named[place] != 1]
    )


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


def test_each_folder_sits_whole_in_one_row() -> None:
    """No exception rows: a row names folders and top-level modules, never a module inside a
    folder, so a folder's modules are all in the layer its row says."""
    assert misplaced(layers()) == []


def test_a_folder_split_across_rows_is_found(tmp_path: Path) -> None:
    """What the check above rests on: a row naming some modules of a folder (in brackets or
    as paths) beside the row naming the folder, as the table once did, is refused."""
    for module in ("indexing/__init__.py", "indexing/worker.py", "indexing/building.py", "db.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).touch()
    table = parse_layers(
        "| processes | `indexing/` (`worker`) | 1 | 10 |\n"
        "| building | `indexing/building` | 1 | 10 |\n"
        "| edges | `db`, `db` | 1 | 10 |\n"
    )
    assert misplaced(table, tmp_path) == [
        "db is named by 2 rows",
        "indexing/building names no folder or top-level module",
        "worker names no folder or top-level module",
    ]
    assert misplaced(parse_layers("| processes | `indexing/`, `db` | 3 | 10 |\n"), tmp_path) == []


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


def test_no_two_folders_import_each_other() -> None:
    """The folders' arrows run one way: no folder (or module at the top) imports one that
    imports it back, directly or around a loop, though each of their modules may be in order."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        here = folder_of(module)
        graph.setdefault(here, set()).update(
            there for target in runtime_imports(path) if (there := folder_of(target)) != here
        )
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as loop:
        raise AssertionError(f"folders importing each other: {' -> '.join(loop.args[1])}") from None


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
    table = [Layer("faces", ("web/",), 0, 0), Layer("composition", ("container",), 0, 0)]
    modules = ("web/routes", "web", "container", "cli")
    assert [layer_of(m, table) for m in modules] == [0, 0, 1, None]
