"""The house rules that a reader cannot check by eye, checked on every run.

No import cycle among TOMC's modules (imports inside functions count: a cycle that is only
avoided at run time is still a cycle); the pure core imports nothing of the adapters and no I/O
library, the chat package nothing of the surfaces, the gateway nothing of the notebook store;
no module over 500 lines and no function over 80; the layout table of docs/architecture.md
names exactly the module files of the tree; and no document names a module or file that no
longer exists.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "tomc"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


# ---- the import graph ---------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node``, at any depth, except in ``if TYPE_CHECKING:``
    blocks (those never run, so they cannot close a cycle)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _import_nodes_of(other)
            continue
        yield from _import_nodes_of(child)


def _import_nodes_of(node: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _import_nodes(node)


def imported_names(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The absolute names module ``name`` imports: ``from .x import y`` gives ``pkg.x.y`` when
    that is a module in ``known``, else ``pkg.x``."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            found.add(submodule if submodule in known else target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each TOMC module -> the TOMC modules it imports (anywhere in its body)."""
    modules = _modules()
    return {
        name: {dep for dep in imported_names(name, path, modules) if dep in modules} - {name}
        for name, path in modules.items()
    }


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each as a closed path
    (``[a, b, a]``) that shows one way round it; sorted, so the report is stable."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(_closed_path(graph, component) for component in components)


def _closed_path(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """A path from the component's first member back to itself, inside the component."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for dep in sorted(graph.get(node, ())):
            if dep == start:
                return [*paths[node], start]
            if dep in members and dep not in paths:
                paths[dep] = [*paths[node], dep]
                queue.append(dep)
    raise AssertionError(f"{component} is not a cycle")


def test_cycle_finder_reports_a_cycle_and_only_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycles({"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"p"}}) == [
        ["p", "q", "p"],
        ["x", "y", "x"],
    ]


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .c import C\n"
        "def f():\n    from .b import g\n    from . import c\n"
    )
    known = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    assert imported_names("pkg.a", package / "a.py", known) == {"typing", "pkg.b", "pkg.c"}
    (package / "sub").mkdir()
    (package / "sub" / "d.py").write_text("from .. import a\nfrom ..b import y\n")
    assert imported_names("pkg.sub.d", package / "sub" / "d.py", known) == {"pkg.a", "pkg.b"}


def test_no_import_cycle() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


# ---- layering -----------------------------------------------------------------------------

# What the pure core may import beyond itself: the standard library, except what does I/O or
# keeps processes and threads, and the optional exact tokenizer.
CORE_THIRD_PARTY = {"bpe_openai"}
CORE_FORBIDDEN_STDLIB = {
    "asyncio",
    "http",
    "os",
    "selectors",
    "shutil",
    "socket",
    "sqlite3",
    "ssl",
    "subprocess",
    "tempfile",
    "threading",
    "urllib",
}
# What a package must not depend on: the chat package (a caller's own loop, and the gateway's
# policy) on any surface; the shared HTTP server on what it serves; the gateway on the notebook
# store (it needs only TOMC's home folder) and on the LiteLLM hook built on it; the hook's work
# on LiteLLM itself (only tomc.litellm imports it, so the work is tested without it).
FORBIDDEN = {
    "tomc.chat": (
        "tomc._gateway",
        "tomc._mcp",
        "tomc._cli",
        "tomc.web",
        "tomc._http",
        "tomc._simulation",
    ),
    "tomc._http": ("tomc._gateway", "tomc.web", "tomc._mcp", "tomc._cli", "tomc.chat"),
    "tomc._gateway": ("tomc._notebooks", "tomc._notebook_db", "tomc._litellm", "tomc.litellm"),
    "tomc._litellm": ("tomc.litellm", "litellm"),
}


def _all_imports(prefix: str) -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: imported_names(name, path, modules)
        for name, path in modules.items()
        if name == prefix or name.startswith(prefix + ".")
    }


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_core_imports_only_itself_and_pure_libraries() -> None:
    problems = []
    for module, imports in sorted(_all_imports("tomc._core").items()):
        for name in sorted(imports):
            top = name.split(".")[0]
            if _within(name, "tomc._core") or name == "__future__":
                continue
            if top == "tomc":
                problems.append(f"{module} imports {name}, outside the core")
            elif top in CORE_FORBIDDEN_STDLIB:
                problems.append(f"{module} imports {name}, which does I/O")
            elif top not in sys.stdlib_module_names and top not in CORE_THIRD_PARTY:
                problems.append(f"{module} imports {name}, not a pure dependency of the core")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_nothing_forbidden(package: str) -> None:
    problems = [
        f"{module} imports {name}"
        for module, imports in sorted(_all_imports(package).items())
        for name in sorted(imports)
        if any(_within(name, other) for other in FORBIDDEN[package])
    ]
    assert not problems, "\n".join(problems)


# ---- the gateway's layers ------------------------------------------------------------------

#: The gateway's parts, lowest first: a module may import from its own layer and lower ones
#: only. The settings and the gateway's own address and probes are leaves; the agents'
#: configurations know nothing of the proxy or the launcher; the proxy (request policy,
#: exchange, rewrite, relay, metering, stores) knows the agents' limits; the launcher, the
#: status command and activation use all of them; the commands sit on top.
GATEWAY_LAYERS = (
    ("tomc._gateway.settings", "tomc._gateway.health"),
    ("tomc._gateway.agents",),
    ("tomc._gateway.proxy",),
    ("tomc._gateway.local",),
    ("tomc._gateway", "tomc._gateway.commands", "tomc._gateway.serving"),
)


def _layer(module: str) -> int | None:
    """The layer of the longest entry naming ``module`` or a package holding it (the
    ``tomc._gateway`` package itself only by its own name)."""
    found = [
        (len(part), index)
        for index, parts in enumerate(GATEWAY_LAYERS)
        for part in parts
        if module == part or (part != "tomc._gateway" and module.startswith(part + "."))
    ]
    return max(found)[1] if found else None


def layer_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Each import from a gateway module to one in a higher layer."""
    problems = []
    for module, imports in sorted(graph.items()):
        here = _layer(module)
        for name in sorted(imports):
            there = _layer(name)
            if here is not None and there is not None and there > here:
                problems.append(f"{module} (layer {here}) imports {name} (layer {there})")
    return problems


def test_layer_checker_reports_an_import_upwards() -> None:
    graph = {
        "tomc._gateway.agents.limits": {"tomc._gateway.local.launcher"},
        "tomc._gateway.local.launcher": {"tomc._gateway.agents.limits", "tomc._gateway.health"},
        "tomc._gateway.proxy.store.redis": {"tomc._gateway.proxy.metering.ledger"},
    }
    assert layer_violations(graph) == [
        "tomc._gateway.agents.limits (layer 1) imports tomc._gateway.local.launcher (layer 3)"
    ]


def test_every_gateway_module_has_a_layer() -> None:
    missing = [
        name for name in _modules() if _within(name, "tomc._gateway") and _layer(name) is None
    ]
    assert not missing, missing


def test_gateway_packages_point_one_way() -> None:
    assert not layer_violations(import_graph()), "\n".join(layer_violations(import_graph()))


# ---- the dialect seam ---------------------------------------------------------------------

#: A wire format written outside the package, as a user would write one: the test-only one.
OUTSIDE_FORMAT = ROOT / "tests" / "chat" / "dialects" / "gemini_like.py"


def private_tomc_imports(path: Path) -> list[str]:
    """The TOMC names a file outside the package imports from a private module, or private
    names it imports from a public one."""
    found = []
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tomc"):
            module = node.module or ""
            if any(part.startswith("_") for part in module.split(".")):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [
                alias.name
                for alias in node.names
                if alias.name.startswith("tomc") and "._" in alias.name
            ]
    return found


def test_seam_checker_finds_a_private_name(tmp_path: Path) -> None:
    fmt = tmp_path / "fmt.py"
    fmt.write_text(
        "from tomc.chat.dialects import BaseDialect\n"
        "from tomc.chat._conversation import Entry\n"
        "import tomc.chat.dialects._wire\n",
        encoding="utf-8",
    )
    assert private_tomc_imports(fmt) == ["tomc.chat._conversation", "tomc.chat.dialects._wire"]


def test_a_new_wire_format_needs_only_public_names() -> None:
    assert private_tomc_imports(OUTSIDE_FORMAT) == []


# ---- sizes --------------------------------------------------------------------------------


def _function_lengths(path: Path) -> Iterable[tuple[str, int, int]]:
    """(qualified name, first line, length) of every function, decorators included."""

    def walk(node: ast.AST, prefix: str) -> Iterable[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    yield name, start, child.end_lineno - start + 1
                yield from walk(child, name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")), "")


def _sized_files() -> list[tuple[str, Path]]:
    return [(str(path.relative_to(SRC)), path) for path in sorted(PACKAGE.rglob("*.py"))]


def test_size_checker_measures_whole_functions(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        '@dec(\n    1,\n)\ndef f():\n    """Doc."""\n    return 1\n\nclass K:\n'
        "    def g(self):\n        pass\n"
    )
    assert list(_function_lengths(path)) == [("f", 1, 6), ("K.g", 9, 2)]


def test_no_module_over_500_lines() -> None:
    long = [
        f"{rel}: {n} lines"
        for rel, path in _sized_files()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, "\n".join(long)


def test_no_function_over_80_lines() -> None:
    long = [
        f"{rel}:{start} {name}: {length} lines"
        for rel, path in _sized_files()
        for name, start, length in _function_lengths(path)
        if length > MAX_FUNCTION_LINES
    ]
    assert not long, "\n".join(long)


# ---- the documented layout ----------------------------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layout_table() -> dict[str, str]:
    """``tomc/...py`` -> job, from the first table of docs/architecture.md. A row names its
    package (blank: the row above's) and one or more modules in backticks."""
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("| package |")]
    assert starts, "docs/architecture.md has no layout table (| package | modules | job |)"
    start = starts[0]
    table: dict[str, str] = {}
    package = ""
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == 3, f"a layout row needs package | modules | job: {line}"
        if cells[0]:
            package = cells[0].strip("`")
        for module in re.findall(r"`([^`]+)`", cells[1]):
            assert module not in table, f"{package}{module} is listed twice"
            table[package + module] = cells[2]
    return table


def test_layout_table_lists_exactly_the_modules() -> None:
    listed = set(layout_table())
    in_tree = {
        str(path.relative_to(SRC))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }
    assert not listed - in_tree, f"listed but not in the tree: {sorted(listed - in_tree)}"
    assert not in_tree - listed, f"in the tree but not listed: {sorted(in_tree - listed)}"


README = ROOT / "README.md"


def readme_packages() -> set[str]:
    """The packages the README's layout table names: ``src/tomc/x/`` in full, or ``y/`` after
    a full path in the same row, inside it (``src/tomc/_gateway/``, ``proxy/`` -> both)."""
    text = README.read_text(encoding="utf-8")
    assert "## Layout" in text, "README.md has no Layout section"
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named: set[str] = set()
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        parent = ""
        for token in re.findall(r"`([^`]+/)`", row.split("|")[1]):
            if token.startswith("src/"):
                named.add(token)
                parent = token
            else:
                named.add(parent + token)
    return named


def test_readme_layout_names_every_package() -> None:
    named = readme_packages()
    packages = {
        f"{path.parent.relative_to(ROOT)}/"
        for path in PACKAGE.rglob("__init__.py")
        # The README goes two levels down; architecture.md lists every module.
        if len(path.parent.relative_to(PACKAGE).parts) <= 2
    }
    assert not named - packages, f"named but not packages: {sorted(named - packages)}"
    assert not packages - named, f"packages the README does not name: {sorted(packages - named)}"


# ---- references in the documents ----------------------------------------------------------

DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
# Repository paths a document may name in backticks.
PATH_ROOTS = ("src/", "tomc/", "tests/", "benchmarks/", "examples/", "docs/")


def _backticked(pattern: str) -> list[tuple[str, str]]:
    return [
        (str(doc.relative_to(ROOT)), match)
        for doc in DOCUMENTS
        for match in re.findall(pattern, doc.read_text(encoding="utf-8"))
    ]


def _module_file(parts: list[str]) -> Path:
    """The source file of the longest module prefix of ``parts`` (``tomc.litellm.hook`` ->
    ``src/tomc/litellm.py``)."""
    for cut in range(len(parts), 1, -1):
        path = SRC.joinpath(*parts[:cut])
        if path.with_suffix(".py").exists():
            return path.with_suffix(".py")
        if (path / "__init__.py").exists():
            return path / "__init__.py"
    return SRC / "missing"


def _resolves(dotted: str) -> bool:
    """Whether a documented dotted name exists. A module of an extra whose dependency is not
    installed here (``tomc.litellm`` needs LiteLLM) exists when its file does."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError as exc:
            missing = exc.name or ""
            if missing and not missing.startswith("tomc"):
                return _module_file(parts[:cut]).exists()
            continue
        for attr in parts[cut:]:
            if not hasattr(value, attr):
                return False
            value = getattr(value, attr)
        return True
    return False


@pytest.mark.parametrize("doc, dotted", _backticked(r"`(tomc(?:\.\w+)+)"))
def test_documented_names_exist(doc: str, dotted: str) -> None:
    assert _resolves(dotted), f"{doc} names {dotted}, which does not exist"


@pytest.mark.parametrize(
    "doc, path", _backticked(r"`((?:" + "|".join(map(re.escape, PATH_ROOTS)) + r")[\w./-]+)`")
)
def test_documented_paths_exist(doc: str, path: str) -> None:
    where = SRC / path if path.startswith("tomc/") else ROOT / path
    assert where.exists(), f"{doc} names {path}, which does not exist"
