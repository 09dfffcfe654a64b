"""The import graph of archsim/ has no circles and no upward imports (issue 25, item 5).

The layers, bottom to top (docs/extending.md): a module may import from its own layer or below. Built from the
source with `ast`, so nothing is imported: every `import` counts, also one inside a function (a lazy upward
import is still an upward dependency), except those under `if TYPE_CHECKING:` (annotations only). The package
root `archsim/__init__.py` is the public facade (lazy `run`, `load_result`, ...): importing `__version__` from it
is allowed from anywhere, and it sits at the top.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "archsim"

# (layer, module prefixes); a module belongs to the layer of its longest matching prefix
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("helpers", ("archsim.errors", "archsim.units", "archsim.expr", "archsim.config", "archsim.schema",
                 "archsim.paths", "archsim.output", "archsim.progress", "archsim.results", "archsim.registry",
                 "archsim.keypaths", "archsim.stats_names", "archsim.metrics", "archsim.study.intent",
                 "archsim.limits")),
    ("devices", ("archsim.dram", "archsim.isa")),
    ("engine", ("archsim.engine", "archsim.energy")),
    ("units", ("archsim.pim", "archsim.npu", "archsim.host", "archsim.interconnect", "archsim.workload",
               "archsim.summary", "archsim.warm")),
    ("systems", ("archsim.systems",)),
    ("front", ("archsim.commands", "archsim.cli", "archsim.sweep", "archsim.report", "archsim.api", "archsim")),
]


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node outside `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            stack.extend(n.orelse)
            continue
        yield n
        stack.extend(ast.iter_child_nodes(n))


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for n in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names if a.name.startswith("archsim")}
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")[:len(pkg.split(".")) - (n.level - 1)]
                mod = ".".join(base + ([n.module] if n.module else []))
            else:
                mod = n.module or ""
            if not mod.startswith("archsim"):
                continue
            for a in n.names:
                if f"{mod}.{a.name}" in mods:
                    out.add(f"{mod}.{a.name}")
                elif not (mod == "archsim" and a.name == "__version__"):
                    out.add(mod)
    return {m for m in out if m in mods and m != name}


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for pre in prefixes:
            if (module == pre or module.startswith(pre + ".")) and len(pre) > best_len:
                best, best_len = i, len(pre)
    return best


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_edge(a: str, b: str) -> bool:
    """A package's __init__ importing its own submodules (re-exports) is not a circle by itself."""
    return b.startswith(a + ".")


def test_every_module_has_a_layer() -> None:
    missing = [m for m in import_graph() if layer_of(m) < 0]
    assert not missing, f"modules in no layer of LAYERS (add them): {missing}"


def test_no_upward_imports() -> None:
    graph = import_graph()
    up = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
          for a in sorted(graph) for b in sorted(graph[a]) if layer_of(b) > layer_of(a)]
    assert not up, "upward imports:\n  " + "\n  ".join(up)


def test_no_import_circles() -> None:
    graph = import_graph()
    graph = {a: {b for b in bs if not _package_edge(a, b)} for a, bs in graph.items()}
    circles = _cycles(graph)
    assert not circles, "import circles:\n  " + "\n  ".join(" <-> ".join(c) for c in circles)


def test_the_checker_sees_an_upward_import_and_a_circle() -> None:
    """The checks can fail: an engine -> systems edge is upward, a -> b -> a is a circle."""
    assert layer_of("archsim.systems.t3.sim") > layer_of("archsim.engine.channel")
    assert layer_of("archsim.dram.verilog") < layer_of("archsim.engine.tables")
    assert _cycles({"x": {"y"}, "y": {"x"}, "z": set()}) == [["x", "y"]]
    graph = import_graph()
    assert "archsim.engine.tables" in graph["archsim.engine.memory"], "the graph misses a plain import"
