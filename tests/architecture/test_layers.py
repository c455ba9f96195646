"""The layer rules, read from the source with ast (every import, module level or inside a function):
what each folder may import, and no import cycles between modules. CI runs this, so a change that
points an import up a layer fails here, naming the module and what it imports.

    cli/                    parsing and rendering: may import anything of ge
    core/api                the Python API: a facade over the three rooms below
    core/atc                ATC's driver (options, settings, compile, write)
    core/acl                ACL's runtime face (load, execute, memory, gears, profiles; pyACL,
                            ais_bench): never the compiler, ATC's driver or inspection
    core/inspection         ge inspect and ge compare: never the compiler or ATC's driver
    core/compile, passes    the compiler: never the CLI, the drivers or the runtime
    core/runtime            the deployed runtime: never the compiler, ONNX import or the drivers
    core/kernels            op specs and plans: never the runtime, the compiler or the drivers
    formats/                file formats: only the bottom layer below
    core/model              the bottom layer (the IR, the model records, errors, weight-file
                            names, SoCs): nothing of ge
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"cli": "ge.cli", "core": "ge.core", "formats": "ge.formats"}

COMPILER = ("ge.core.compile", "ge.core.passes", "ge.formats.onnx")
#: the data model everything else builds on (the IR, the GeModel and DynamicModel records, ...)
BOTTOM = ("ge.core.model",)
ATC, ACL, INSPECTION = "ge.core.atc", "ge.core.acl", "ge.core.inspection"
DRIVERS = ("ge.core.api", ATC, ACL, INSPECTION, "ge.cli")

#: (modules under this prefix, may not import modules under these prefixes)
RULES = [
    ("ge.core", ("ge.cli",)),
    ("ge.formats", ("ge.cli", "ge.core.compile", "ge.core.passes") + DRIVERS),
    (ACL, COMPILER + ("ge.core.api", ATC, INSPECTION)),
    (INSPECTION, COMPILER + ("ge.core.api", ATC)),
    (ATC, ("ge.core.api", ACL, INSPECTION)),
    ("ge.core.runtime", COMPILER + DRIVERS),
    ("ge.core.kernels", COMPILER + DRIVERS + ("ge.core.runtime",)),
    ("ge.core.compile", DRIVERS + ("ge.core.runtime",)),
    ("ge.core.passes", DRIVERS + ("ge.core.runtime",)),
]


def module_files() -> dict[str, Path]:
    out = {}
    for folder, package in ROOTS.items():
        for f in sorted((REPO / folder).rglob("*.py")):
            if "shim" in f.relative_to(REPO / folder).parts:  # the opt-in ACL modules: user code, not ge's
                continue
            parts = [p for p in f.relative_to(REPO / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = f
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The ge modules `name` imports (a `from pkg import x` names module pkg.x when there is one)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(package[:len(package) - node.level + 1] + ([module] if module else []))
            candidates = [f"{module}.{a.name}" for a in node.names] + [module]
        else:
            continue
        for c in candidates:
            while c and c not in known:
                c = c.rpartition(".")[0]
            if c and c != name:
                found.add(c)
                break
    return found


GRAPH = {m: imports_of(m, p, set(module_files())) for m, p in module_files().items()}


def inside(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in ((prefixes,) if isinstance(prefixes, str) else prefixes))


@pytest.mark.parametrize("layer,forbidden", RULES, ids=[r[0] for r in RULES])
def test_layer_imports_nothing_above_it(layer, forbidden):
    bad = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() if inside(m, layer)
                 for d in deps if inside(d, forbidden))
    assert bad == []


@pytest.mark.parametrize("layer,allowed", [(BOTTOM, BOTTOM), ("ge.formats", BOTTOM + ("ge.formats",))],
                         ids=["bottom", "formats"])
def test_layer_imports_only_below_it(layer, allowed):
    bad = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() if inside(m, layer)
                 for d in deps if not inside(d, allowed))
    assert bad == []


def test_no_import_cycles():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components, iterative enough for ge's depth
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            # a package importing its own submodules (an __init__ re-export) is no cycle of design
            real = [m for m in component if not any(o.startswith(m + ".") for o in component)]
            if len(real) > 1:
                cycles.append(" <-> ".join(sorted(component)))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_rules_see_the_code():
    """A parse that finds nothing would pass every rule: the graph holds ge's real imports."""
    assert "ge.core.runtime.device" in GRAPH["ge.core.runtime.model_manager"]
    assert any(d.startswith("ge.core.acl") for d in GRAPH["ge.cli.run"])
