"""Every SQL statement in kb is parameterised: the source is read, and any statement built
from strings (f-strings, % or str.format, concatenation with a variable) fails this test. And
kb's SQL lives in `migrations/` and `src/kb/store/` only.

Values travel as query parameters; the few identifiers and constants that cannot (an index's
vector size, a model name in an index predicate) go through psycopg.sql's Literal and
Identifier, which quote them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "src" / "kb").rglob("*.py"), *(ROOT / "bench").glob("*.py")])
SQL_WORDS = re.compile(
    r"\b(SELECT\b|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s|DROP\s|ALTER\s|"
    r"WHERE\s|SET\s+LOCAL)"
)
EXECUTE = {"execute", "executemany"}
STORE = ROOT / "src" / "kb" / "store"
OUTSIDE_STORE = sorted(
    p for p in (ROOT / "src" / "kb").rglob("*.py") if not p.is_relative_to(STORE)
)


def _is_sql_composition(node: ast.expr, names: dict[str, ast.expr]) -> bool:
    """sql.SQL("…"), optionally .format(…)-ed: psycopg quotes whatever is put in it."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format":
            return _is_sql_composition(node.func.value, names)
        if node.func.attr == "SQL" and node.args:
            return _is_static(node.args[0], names)
    return False


def _is_static(node: ast.expr, names: dict[str, ast.expr]) -> bool:
    """A statement whose text is fixed in the source."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_static(node.left, names) and _is_static(node.right, names)
    if isinstance(node, ast.Name) and node.id in names:
        return _is_static(names[node.id], {k: v for k, v in names.items() if k != node.id})
    if _is_sql_composition(node, names):
        return True
    # A call to a function of the module whose every return is a fixed statement.
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return f"{node.func.id}()" in names
    # A migration file's own text, read from migrations/ (the one other home of SQL).
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "encode"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "sql"
    )


def _assignments(tree: ast.AST) -> dict[str, ast.expr]:
    return {
        target.id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _forwarded(tree: ast.AST, function: ast.FunctionDef, names: dict[str, ast.expr]) -> set[str]:
    """Parameters of `function` that every call in the module fills with a fixed statement:
    a helper that runs the statement it is given (`self._run("SELECT …", …)`)."""
    params = [a.arg for a in function.args.args]
    offset = 1 if params[:1] == ["self"] else 0
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == function.name)
            or (isinstance(n.func, ast.Name) and n.func.id == function.name)
        )
    ]
    return {
        name
        for i, name in enumerate(params[offset:])
        if calls and all(len(c.args) > i and _is_static(c.args[i], names) for c in calls)
    }


def _imported(tree: ast.AST) -> dict[str, ast.expr]:
    """The constants a module imports from another of kb's (a fragment of SQL the store's
    modules share), as that module assigns them."""
    found: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kb."):
            path = ROOT / "src" / Path(*node.module.split(".")).with_suffix(".py")
            if path.is_file():
                theirs = _assignments(ast.parse(path.read_text()))
                found.update({a.name: theirs[a.name] for a in node.names if a.name in theirs})
    return found


def _building(tree: ast.Module, names: dict[str, ast.expr]) -> dict[str, ast.expr]:
    """The module's functions that build a statement, each return of it fixed in the source
    (`candidates_sql(…)`), as names a call to them stands for ("f()")."""
    fixed: dict[str, ast.expr] = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        returns = [n.value for n in ast.walk(function) if isinstance(n, ast.Return) and n.value]
        local = {**names, **_assignments(function)}
        if returns and all(_is_static(r, local) for r in returns):
            fixed[f"{function.name}()"] = ast.Constant("")
    return fixed


def violations(source: str) -> list[str]:
    tree = ast.parse(source)
    module_names = {**_imported(tree), **_assignments(tree)}
    module_names.update(_building(tree, module_names))
    # Each call is judged with the names of the functions around it.
    enclosing: dict[ast.AST, list[ast.FunctionDef]] = {}

    def visit(node: ast.AST, functions: list[ast.FunctionDef]) -> None:
        for child in ast.iter_child_nodes(node):
            enclosing[child] = functions
            visit(child, [*functions, child] if isinstance(child, ast.FunctionDef) else functions)

    visit(tree, [])
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in EXECUTE
            and node.args
        ):
            continue
        names = dict(module_names)
        for function in enclosing.get(node, []):
            names.update(_assignments(function))
            fixed = ast.Constant("")  # stands for a statement fixed at every call site
            names.update(dict.fromkeys(_forwarded(tree, function, module_names), fixed))
        if not _is_static(node.args[0], names):
            found.append(f"line {node.lineno}: {ast.unparse(node.args[0])[:80]}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr):
            continue
        text = None
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value
                for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                text = node.left.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
        ):
            text = node.func.value.value
        if text is not None and SQL_WORDS.search(text):
            found.append(f"line {node.lineno}: SQL built from a string: {text[:80]!r}")
    return sorted(set(found))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_statement_is_built_from_strings(path: Path) -> None:
    assert violations(path.read_text()) == []


BAD = [
    'def f(conn, x):\n    conn.execute(f"SELECT * FROM t WHERE a = {x}")\n',
    'def f(conn, x):\n    conn.execute("SELECT * FROM t WHERE a = %s" % x)\n',
    'def f(conn, x):\n    conn.execute("SELECT * FROM t WHERE a = {}".format(x))\n',
    'def f(conn, x):\n    conn.execute("SELECT * FROM t WHERE a = " + x)\n',
    "def f(cur, p):\n    q = f\"DELETE FROM t WHERE p = '{p}'\"\n    cur.executemany(q, [])\n",
    "def f(conn, q):\n    conn.execute(q)\n",
    # A helper that runs what it is given, once given a built string, is caught too.
    "def run(conn, q):\n    conn.execute(q)\n"
    'def f(conn, x):\n    run(conn, "SELECT 1")\n    run(conn, f"SELECT {x}")\n',
    # A function that builds the statement from a string.
    'def q(x):\n    return f"SELECT * FROM t WHERE a = {x}"\n'
    "def f(conn, x):\n    conn.execute(q(x))\n",
]
GOOD = [
    'def f(conn, x):\n    conn.execute("SELECT * FROM t WHERE a = %s", (x,))\n',
    'Q = "SELECT id FROM t"\ndef f(conn, x):\n    conn.execute(Q + " WHERE a = %s", (x,))\n',
    "from psycopg import sql\n"
    "def f(conn, d):\n"
    '    q = sql.SQL("CREATE INDEX i ON t ((v::vector({d})))").format(d=sql.Literal(d))\n'
    "    conn.execute(q)\n",
    "def run(conn, q, p=()):\n    conn.execute(q, p)\n"
    'def f(conn, x):\n    run(conn, "SELECT * FROM t WHERE a = %s", (x,))\n',
    "from psycopg import sql\n"
    "def q(d):\n"
    '    return sql.SQL("SELECT v::vector({d}) FROM t").format(d=sql.Literal(d))\n'
    "def f(conn, d):\n    conn.execute(q(d))\n",
]


@pytest.mark.parametrize("source", BAD)
def test_the_check_catches_string_built_sql(source: str) -> None:
    assert violations(source)


@pytest.mark.parametrize("source", GOOD)
def test_the_check_accepts_parameters_and_composition(source: str) -> None:
    assert violations(source) == []


def sql_spelled(source: str) -> list[str]:
    """Where a module runs a statement or spells one: a call to execute (or psycopg.sql's
    SQL), or a string with SQL's words in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in {*EXECUTE, "SQL"}:
            found.append(f"line {node.lineno}: {node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL_WORDS.search(node.value)
        ):
            found.append(f"line {node.lineno}: {node.value[:80]!r}")
    return found


@pytest.mark.parametrize("path", OUTSIDE_STORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_sql_lives_in_the_store(path: Path) -> None:
    assert sql_spelled(path.read_text()) == []


def test_the_check_finds_sql_outside_the_store() -> None:
    assert sql_spelled('def f(conn):\n    conn.execute("SELECT 1")\n') == [
        "line 2: execute",
        "line 2: 'SELECT 1'",
    ]
    assert sql_spelled('Q = sql.SQL("DROP DATABASE {}")\n') == [
        "line 1: SQL",
        "line 1: 'DROP DATABASE {}'",
    ]
    assert sql_spelled('"""Selects the notes where a name is."""\n') == []
