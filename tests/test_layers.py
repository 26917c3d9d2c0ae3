"""The layers hold: imports only go down, and no private name crosses a module.

Every breach the layers ever had hid inside a function, so the checker reads the source
with :mod:`ast` rather than importing it: every ``import`` and ``from … import`` counts,
at module level, inside functions and under ``TYPE_CHECKING``, relative ones resolved,
and so does ``importlib.import_module``/``__import__`` of a literal name.

The layers, bottom to top (a module may import its own package and any package below):

1. ``invariants``: the contract, errors, history, wording, checkers, stateful machine,
   adapters and pytest plugin;
2. ``reference_store``: of ``invariants``, only ``invariants.backend``,
   ``invariants.errors`` and the text folding in ``invariants.normalize``;
3. ``scenarios``: plan data and generators;
4. ``chaos``: the runner, faults, nemesis, metrics, reports, CLI and certify;
5. ``memcert``: the front door.

Within ``chaos``, ``run_plan`` sits above the runner, the nemesis and the processes
modules, which hand work up to it and so must never import it back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: Mapping[str, int] = {
    "invariants": 1,
    "reference_store": 2,
    "scenarios": 3,
    "chaos": 4,
    "memcert": 5,
}

# The modules of invariants that reference_store may import: the contract, the errors,
# and the normalizer (a package), which lives below so that the production guard and the
# audit canonicalise exactly as the store does. Never the checkers or the history: the
# store must not be right by borrowing its judge's code.
STORE_MAY_USE = frozenset({"invariants.backend", "invariants.errors", "invariants.normalize"})

# The modules that hand work up to run_plan, so must not import the module defining it.
BELOW_RUN_PLAN = frozenset({"chaos.runner", "chaos.nemesis", "chaos.processes"})

# The only upward imports allowed, by (file, imported module), with their reasons: each
# through importlib, never an import statement. Each one must still exist: a stale
# exception would let the next upward import through unseen.
ALLOWED_UPWARD: Mapping[tuple[str, str], str] = {
    ("invariants/__init__.py", "memcert"): (
        "invariants.certify, kept for compatibility, is a late-bound alias of "
        "memcert.certify, looked up by the package's __getattr__ through importlib on "
        "first use: the certify facade has one home, in memcert, and importing "
        "invariants loads nothing above it"
    ),
}


@dataclass(frozen=True)
class Edge:
    """One import of one module by another, with where it is written."""

    path: str
    line: int
    importer: str
    imported: str
    how: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} -> {self.imported} ({self.how})"


@dataclass(frozen=True)
class Source:
    """One module of the tree, parsed."""

    path: str
    module: str
    is_package: bool
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package a relative import of this module is resolved against."""
        return self.module if self.is_package else self.module.rpartition(".")[0]


def parse_tree(root: Path, packages: Mapping[str, int]) -> dict[str, Source]:
    """Parse every module of ``packages`` under ``root``, keyed by dotted name."""
    sources: dict[str, Source] = {}
    for top in packages:
        for file in sorted((root / top).rglob("*.py")):
            relative = file.relative_to(root)
            if "__pycache__" in relative.parts:
                continue
            parts = list(relative.with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            module = ".".join(parts)
            tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(relative))
            sources[module] = Source(relative.as_posix(), module, is_package, tree)
    return sources


def resolve_from(source: Source, node: ast.ImportFrom) -> str:
    """The absolute module named by ``from … import``, relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    base = source.package.split(".")
    if node.level - 1 > len(base):
        raise ValueError(f"{source.path}:{node.lineno}: relative import beyond the top")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def literal_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("x")`` or ``__import__("x")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def edges_of(source: Source, modules: Mapping[str, Source]) -> Iterator[Edge]:
    """Every import ``source`` makes, wherever it is written. ``from a import b`` where
    ``a.b`` is a module of the tree imports ``a.b`` too."""
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(source.path, node.lineno, source.module, alias.name, "import")
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(source, node)
            yield Edge(source.path, node.lineno, source.module, base, "from-import")
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    yield Edge(
                        source.path, node.lineno, source.module, f"{base}.{alias.name}",
                        "from-import",
                    )
        elif isinstance(node, ast.Call) and (name := literal_import(node)) is not None:
            yield Edge(source.path, node.lineno, source.module, name, "dynamic import")


def top(module: str) -> str:
    return module.partition(".")[0]


def defining(sources: Mapping[str, Source], function: str) -> list[str]:
    """The modules that define ``function`` at their top level."""
    return [
        source.module
        for source in sources.values()
        if any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
            for node in source.tree.body
        )
    ]


def layer_breaches(
    root: Path,
    packages: Mapping[str, int] = LAYERS,
    allowed: Mapping[tuple[str, str], str] = ALLOWED_UPWARD,
) -> list[str]:
    """Every import that breaks a layer rule, one line each naming file, line and edge."""
    sources = parse_tree(root, packages)
    breaches: list[str] = []
    used: set[tuple[str, str]] = set()
    run_plan_homes = set(defining(sources, "run_plan")) if "chaos" in packages else set()
    for source in sources.values():
        here = top(source.module)
        for edge in sorted(edges_of(source, sources), key=lambda edge: edge.line):
            there = top(edge.imported)
            if there not in packages or there == here:
                if edge.importer in BELOW_RUN_PLAN and edge.imported in run_plan_homes:
                    breaches.append(f"{edge}: imports run_plan's module, which sits above it")
                continue
            if (source.path, edge.imported) in allowed and edge.how == "dynamic import":
                used.add((source.path, edge.imported))
                continue
            if packages[there] > packages[here]:
                breaches.append(f"{edge}: upward, layer {packages[here]} -> {packages[there]}")
            elif here == "reference_store" and there == "invariants" and not any(
                edge.imported == allowed_module or edge.imported.startswith(allowed_module + ".")
                for allowed_module in STORE_MAY_USE
            ):
                breaches.append(
                    f"{edge}: reference_store may import only "
                    f"{', '.join(sorted(STORE_MAY_USE))} of invariants"
                )
        if source.module in BELOW_RUN_PLAN:
            breaches += [
                f"{source.path}:{node.lineno}: {source.module} imports run_plan, "
                "which sits above it"
                for node in ast.walk(source.tree)
                if isinstance(node, ast.ImportFrom)
                and any(alias.name == "run_plan" for alias in node.names)
            ]
    for home in sorted(run_plan_homes & BELOW_RUN_PLAN):
        breaches.append(f"{sources[home].path}: defines run_plan, which must sit above it")
    for path, imported in sorted(set(allowed) - used):
        breaches.append(f"{path}: allowed exception to {imported} is no longer used; drop it")
    return breaches


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (head := dotted(node.value)) is not None:
        return f"{head}.{node.attr}"
    return None


def module_names(source: Source, modules: Mapping[str, Source]) -> dict[str, str]:
    """The names ``source`` binds to modules of the tree, wherever it imports them."""
    bound: dict[str, str] = {}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[top(alias.name)] = top(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(source, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def private_uses(root: Path, packages: Mapping[str, int] = LAYERS) -> list[str]:
    """Every private name one module takes from another: ``from x import _name`` (a
    private submodule only from inside its own package), and ``m._name`` on a module
    ``m`` of the tree."""
    sources = parse_tree(root, packages)
    found: list[tuple[str, int, str]] = []
    for source in sources.values():
        for node in ast.walk(source.tree):
            if isinstance(node, ast.ImportFrom):
                base = resolve_from(source, node)
                for alias in node.names:
                    if not is_private(alias.name):
                        continue
                    submodule = f"{base}.{alias.name}"
                    inside = source.module == base or source.module.startswith(f"{base}.")
                    if submodule in sources and inside:
                        continue
                    found.append((source.path, node.lineno, f"from {base} import {alias.name}"))
        bound = module_names(source, sources)
        for node in ast.walk(source.tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            chain = dotted(node.value)
            if chain is None:
                continue
            head, _, rest = chain.partition(".")
            if head not in bound:
                continue
            module = ".".join(filter(None, [bound[head], rest]))
            if module in sources and module != source.module:
                found.append((source.path, node.lineno, f"{chain}.{node.attr}"))
    return [f"{path}:{line}: {what}" for path, line, what in sorted(found)]


def test_imports_only_go_down() -> None:
    breaches = layer_breaches(ROOT)
    assert not breaches, "imports that break the layers:\n" + "\n".join(breaches)


def test_no_private_name_crosses_a_module() -> None:
    uses = private_uses(ROOT)
    assert not uses, "private names used across modules:\n" + "\n".join(uses)


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


TOY = {"low": 1, "high": 2}


def test_an_upward_import_inside_a_function_is_reported(tmp_path: Path) -> None:
    write(tmp_path, {
        "low/__init__.py": "",
        "low/core.py": "def late():\n    from ..high import api\n    return api\n",
        "high/__init__.py": "",
        "high/api.py": "from low import core\n",
    })
    assert layer_breaches(tmp_path, TOY, {}) == [
        "low/core.py:2: low.core -> high (from-import): upward, layer 1 -> 2",
        "low/core.py:2: low.core -> high.api (from-import): upward, layer 1 -> 2",
    ]


def test_upward_imports_under_type_checking_and_through_importlib_are_reported(
    tmp_path: Path,
) -> None:
    write(tmp_path, {
        "low/__init__.py": (
            "import importlib\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    import high.api\n"
            "def load():\n"
            "    return importlib.import_module('high')\n"
        ),
        "high/__init__.py": "",
        "high/api.py": "",
    })
    assert layer_breaches(tmp_path, TOY, {}) == [
        "low/__init__.py:4: low -> high.api (import): upward, layer 1 -> 2",
        "low/__init__.py:6: low -> high (dynamic import): upward, layer 1 -> 2",
    ]


def test_an_allowed_exception_passes_only_while_it_is_used(tmp_path: Path) -> None:
    write(tmp_path, {
        "low/__init__.py": "import importlib\nimportlib.import_module('high')\n",
        "high/__init__.py": "",
    })
    assert layer_breaches(tmp_path, TOY, {("low/__init__.py", "high"): "why"}) == []
    (tmp_path / "low/__init__.py").write_text("import high\n", encoding="utf-8")
    assert layer_breaches(tmp_path, TOY, {("low/__init__.py", "high"): "why"}) == [
        "low/__init__.py:1: low -> high (import): upward, layer 1 -> 2",
        "low/__init__.py: allowed exception to high is no longer used; drop it",
    ]
    (tmp_path / "low/__init__.py").write_text("", encoding="utf-8")
    assert layer_breaches(tmp_path, TOY, {("low/__init__.py", "high"): "why"}) == [
        "low/__init__.py: allowed exception to high is no longer used; drop it"
    ]


def test_reference_store_may_import_only_the_contract_errors_and_normalizer(
    tmp_path: Path,
) -> None:
    write(tmp_path, {
        "invariants/__init__.py": "",
        "invariants/backend.py": "",
        "invariants/errors.py": "",
        "invariants/history.py": "",
        "invariants/normalize/__init__.py": "",
        "invariants/normalize/surface.py": "",
        "invariants/normalizers.py": "",
        "reference_store/__init__.py": (
            "from invariants.backend import Write\n"
            "from invariants import errors\n"
            "from invariants import history\n"
            "from invariants.normalize.surface import fold\n"
            "from invariants.normalizers import x\n"
        ),
    })
    packages = {"invariants": 1, "reference_store": 2}
    only = ("reference_store may import only invariants.backend, invariants.errors, "
            "invariants.normalize of invariants")
    assert layer_breaches(tmp_path, packages, {}) == [
        f"reference_store/__init__.py:2: reference_store -> invariants (from-import): {only}",
        f"reference_store/__init__.py:3: reference_store -> invariants (from-import): {only}",
        "reference_store/__init__.py:3: reference_store -> invariants.history "
        f"(from-import): {only}",
        "reference_store/__init__.py:5: reference_store -> invariants.normalizers "
        f"(from-import): {only}",
    ]


def test_the_runner_never_imports_run_plans_module(tmp_path: Path) -> None:
    write(tmp_path, {
        "chaos/__init__.py": "",
        "chaos/runner.py": "def run_workers():\n    pass\n",
        "chaos/chaos_run.py": "from .runner import run_workers\ndef run_plan():\n    pass\n",
        "chaos/nemesis.py": "def heal():\n    from . import chaos_run\n",
        "chaos/processes.py": "def spawn():\n    from chaos import run_plan\n",
    })
    assert layer_breaches(tmp_path, {"chaos": 4}, {}) == [
        "chaos/nemesis.py:2: chaos.nemesis -> chaos.chaos_run (from-import): "
        "imports run_plan's module, which sits above it",
        "chaos/processes.py:2: chaos.processes imports run_plan, which sits above it",
    ]


def test_run_plan_in_the_runner_is_reported(tmp_path: Path) -> None:
    write(tmp_path, {
        "chaos/__init__.py": "",
        "chaos/runner.py": "def run_plan():\n    pass\n",
    })
    assert layer_breaches(tmp_path, {"chaos": 4}, {}) == [
        "chaos/runner.py: defines run_plan, which must sit above it",
    ]


def test_private_names_across_modules_are_reported(tmp_path: Path) -> None:
    write(tmp_path, {
        "low/__init__.py": "from . import _impl\n",
        "low/_impl.py": "_secret = 1\n",
        "low/history.py": "_paused = 1\n",
        "high/__init__.py": "",
        "high/api.py": (
            "import low.history\n"
            "from low import history as h, _impl\n"
            "def f():\n"
            "    from low.history import _paused\n"
            "    return h._paused, low.history._paused, h.__name__\n"
        ),
    })
    assert private_uses(tmp_path, TOY) == [
        "high/api.py:2: from low import _impl",
        "high/api.py:4: from low.history import _paused",
        "high/api.py:5: h._paused",
        "high/api.py:5: low.history._paused",
    ]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_package_is_read(package: str) -> None:
    """A package the checker finds no module of would pass whatever it imports."""
    assert any(source.module == package for source in parse_tree(ROOT, LAYERS).values())
