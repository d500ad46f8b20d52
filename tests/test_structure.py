"""The shape of the code, checked: no import cycle, imports only downwards through the layers,
no function over 60 lines, no module over 400 lines. Read from the source with ``ast``; imports
under ``if TYPE_CHECKING:`` are annotations only and do not count."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxproxy

ROOT = Path(ctxproxy.__file__).parent
# Lowest first: a module may import from its own layer's package or a lower one, never a higher one.
LAYERS: tuple[str, ...] = (
    "vocabulary",
    "errors",
    "cache",
    "logs",
    "background",
    "stopwatch",
    "deadline",
    "tool_outputs",
    "store",
    "session",
    "strategies",
    "plugins",
    "config",
    "tokens",
    "upstream",
    "summarize",
    "memory",
    "compaction",
    "tools",
    "services",
    "pipeline",
    "wire",
    "metrics",
    "inspector",
    "server",
    "demo",
    "commands",
    "cli",
    "__main__",
)
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path, ast.parse(path.read_text())


def runtime_imports(tree: ast.Module) -> Iterator[str]:
    """The ctxproxy modules a module imports when it runs."""
    skipped = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for node in ast.walk(branch)
    }
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ctxproxy"):
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("ctxproxy"))


def graph() -> dict[str, set[str]]:
    found = {name: tree for name, _, tree in modules()}
    # A module importing its own package (``ctxproxy.memory.memories`` -> ``ctxproxy.memory``) only
    # names what that package's ``__init__`` re-exports: Python has loaded it first anyway.
    return {
        name: {i for i in runtime_imports(tree) if i in found and i != name and not name.startswith(i + ".")}
        for name, tree in found.items()
    }


def layer(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_every_package_has_a_layer() -> None:
    assert {layer(name) for name in graph()} - {"ctxproxy"} <= set(LAYERS)


def test_imports_only_go_down_the_layers() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [
        f"{module} -> {target}"
        for module, targets in graph().items()
        for target in targets
        if layer(module) in rank and rank.get(layer(target), -1) > rank[layer(module)]
    ]
    assert upward == []


def test_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target] if target in path else [node, target]
            if target not in state and (cycle := visit(target, [*path, target])) is not None:
                return cycle
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            assert visit(start, [start]) is None


@pytest.mark.parametrize("name, path, tree", list(modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_small_functions_and_modules(name: str, path: Path, tree: ast.Module) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines"
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], name


def test_no_module_of_the_package_needs_a_test_only_dependency() -> None:
    """openai and anthropic are in the test extra: every ctxproxy module imports without them."""
    code = (
        "import importlib, pkgutil, sys\n"
        "for name in ('openai', 'anthropic', 'pytest', 'hypothesis'):\n"
        "    sys.modules[name] = None  # an import of it raises ImportError\n"
        "import ctxproxy\n"
        "for module in pkgutil.walk_packages(ctxproxy.__path__, 'ctxproxy.'):\n"
        "    if not module.name.endswith('__main__'):\n"
        "        importlib.import_module(module.name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
