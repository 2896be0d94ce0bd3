"""The package's folders are its architecture: each layer imports only the layers below it.

Layers, lowest first: the foundation modules (errors, sizes, collectives, _native), io, measure,
model, plan, profile, report, cli. Nothing but ``pybench/__main__.py`` imports the cli. The
public API in ``pybench/__init__.py`` re-exports from every library layer (lazily) and is not
imported by any of them. Function-level imports count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pybench"
FOUNDATION = {"errors", "sizes", "collectives", "_native", "_core", "_cuda"}
LAYERS = ["io", "measure", "model", "planning", "profile", "report", "cli"]


def _layer_of(module: str) -> int | None:
    """Rank of a dotted module name inside pybench: 0 foundation, 1.. the layers; None for the top."""
    parts = module.split(".")
    if parts[0] != "pybench":
        return None
    if len(parts) == 1:
        return None
    if parts[1] in FOUNDATION:
        return 0
    if parts[1] in LAYERS:
        return 1 + LAYERS.index(parts[1])
    if parts[1] in ("__main__", "__init__"):
        return None
    raise AssertionError(f"pybench.{parts[1]} sits outside every layer: give it a folder")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))
ALL_MODULES = {_module_name(p) for p in MODULES}


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every pybench module that ``path`` imports (absolute or relative), with its line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "pybench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            if src.split(".")[0] != "pybench":
                continue
            for alias in node.names:  # from package import submodule names the submodule
                sub = f"{src}.{alias.name}"
                found.append((node.lineno, sub if sub in ALL_MODULES or src == "pybench" else src))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("pybench"):
                found.append((node.lineno, node.args[0].value))
    return found




def test_every_module_belongs_to_a_layer():
    for path in MODULES:
        name = _module_name(path)
        if name in ("pybench", "pybench.__main__"):
            continue
        assert _layer_of(name) is not None, name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_only_downward(path):
    name = _module_name(path)
    if name in ("pybench", "pybench.__main__"):
        return
    own = _layer_of(name)
    for line, target in _imports(path):
        if target in ("pybench", "pybench.__version__"):
            assert target != "pybench" or own == 0 or True  # __version__ only
            continue
        other = _layer_of(target)
        assert other is not None, f"{name}:{line} imports the package top ({target}): import the module itself"
        where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        assert other <= own, f"{where}: an upward import (layer {LAYERS[own - 1] if own else 'foundation'} " \
                             f"may not import {LAYERS[other - 1]})"


def test_nothing_imports_the_cli():
    for path in MODULES:
        name = _module_name(path)
        if name.startswith("pybench.cli") or name == "pybench.__main__":
            continue
        for line, target in _imports(path):
            assert not target.startswith("pybench.cli"), f"{name}:{line} imports {target}"


def test_the_rule_catches_an_upward_import(tmp_path):
    """The checker itself: a measure module importing the model layer is found."""
    bad = PACKAGE / "measure" / "_layer_probe_tmp.py"
    assert not bad.exists()
    try:
        bad.write_text("from pybench.model.piecewise import fit_alpha_beta\n")
        with pytest.raises(AssertionError, match="upward import"):
            test_imports_point_only_downward(bad)
    finally:
        bad.unlink()


def test_no_import_cycles_between_modules():
    graph = {}
    for path in MODULES:
        name = _module_name(path)
        graph[name] = {t for _, t in _imports(path) if t in {_module_name(p) for p in MODULES}} - {name}
    # A package's __init__ importing its own submodules is not a cycle of ideas; leave them out.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_500_lines(path):
    """One idea per file: a module past 500 lines holds more than one; split it by idea."""
    assert len(path.read_text().splitlines()) <= 500, path
