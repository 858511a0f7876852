"""The layout's import rules (README, "Layout"), read from the source with ast: every import counts, also those
inside functions."""
import ast
import pathlib

import pytest

from tests.helpers import REPO_ROOT

BASE = {"albert_tf.config", "albert_tf.tokenization"}
# What each part may import besides itself; run_scripts may import anything and nothing imports it.
ALLOWED = {
    "albert_tf.config": set(),
    "albert_tf.tokenization": set(),
    "albert_tf.layers": BASE,
    "albert_tf.training": BASE,
    "albert_tf.models": BASE | {"albert_tf.layers"},
    "albert_tf.checkpoints": BASE | {"albert_tf.layers", "albert_tf.models"},
    "albert_tf.export": BASE | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints"},
    "albert_tf.tasks": BASE | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints", "albert_tf.export",
                               "albert_tf.training", "data_gen"},
    "albert_tf.benchmarking": BASE | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints",
                                      "albert_tf.export", "albert_tf.training", "albert_tf.tasks", "data_gen"},
    "albert_tf.experiments": BASE | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints",
                                     "albert_tf.export", "albert_tf.training", "albert_tf.tasks",
                                     "albert_tf.benchmarking", "data_gen"},
    "data_gen": BASE,
}
FIRST_PARTY = ("albert_tf", "data_gen", "run_scripts")


def _part(module):
    """The part of the layout a dotted module name belongs to."""
    parts = module.split(".")
    if parts[0] != "albert_tf" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def _imports(path):
    """(line, imported module) of every first-party import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from albert_tf import models` names a part; `from albert_tf import AlbertConfig` the package.
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name if _part(name) in ALLOWED or name.startswith("run_scripts") else node.module)
                      for name in submodules]
    return [(line, name) for line, name in found if name.split(".")[0] in FIRST_PARTY]


def _source_files(*packages):
    return [path for package in packages for path in sorted((pathlib.Path(REPO_ROOT) / package).rglob("*.py"))]


def _module_name(path):
    return ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")


@pytest.mark.parametrize("path", _source_files("albert_tf", "data_gen"), ids=_module_name)
def test_imports_follow_the_layout(path):
    own = _part(_module_name(path))
    if own == "albert_tf":
        return  # the package's __init__ names its public classes as strings, for lazy loading
    allowed = ALLOWED[own] | {own}
    wrong = [f"line {line}: {name}" for line, name in _imports(path) if _part(name) not in allowed]
    assert not wrong, f"{_module_name(path)} ({own}) may import only {sorted(allowed)}; it imports {wrong}"


def test_only_scripts_and_tests_import_run_scripts_and_no_library_module_defines_flags():
    offenders = []
    for path in _source_files("albert_tf", "data_gen"):
        source = path.read_text(encoding="utf-8")
        offenders += [f"{_module_name(path)}:{line} imports {name}" for line, name in _imports(path)
                      if name.startswith("run_scripts")]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module == "absl" and any(
                    alias.name == "flags" for alias in node.names):
                offenders.append(f"{_module_name(path)}:{node.lineno} imports absl.flags")
            if isinstance(node, ast.Import) and any(alias.name == "absl.flags" for alias in node.names):
                offenders.append(f"{_module_name(path)}:{node.lineno} imports absl.flags")
    assert offenders == []


def test_scripts_define_no_model_layer_or_loss():
    offenders = []
    for path in _source_files("run_scripts"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                offenders.append(f"{_module_name(path)}: class {node.name}")
            if isinstance(node, ast.FunctionDef) and "loss" in node.name:
                offenders.append(f"{_module_name(path)}: def {node.name}")
    assert offenders == []


def test_library_modules_import_without_cycles():
    graph = {}
    for path in _source_files("albert_tf", "data_gen"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Module-level imports only: an import inside a function runs after both modules exist.
        graph[_module_name(path)] = {name for node in tree.body for _, name in _imports_of_node(node)}
    state = {}

    def visit(module, trail):
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", f"import cycle: {' -> '.join(trail + [module])}"
        state[module] = "open"
        for imported in sorted(graph.get(module, ())):
            target = imported if imported in graph else imported.rsplit(".", 1)[0]
            if target in graph and target != module:
                visit(target, trail + [module])
        state[module] = "done"

    for module in sorted(graph):
        visit(module, [])


def _imports_of_node(node):
    if isinstance(node, ast.Import):
        return [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] in FIRST_PARTY]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
            node.module.split(".")[0] in FIRST_PARTY:
        return [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return []


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted((pathlib.Path(REPO_ROOT) / "tests").rglob("test_*.py")):
        offenders += [f"{_module_name(path)}:{line} imports {name}" for line, name in _test_imports(path)
                      if name.rsplit(".", 1)[-1].startswith("test_") or ".test_" in name]
    assert offenders == []


def _test_imports(path):
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("tests")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("tests"):
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found
