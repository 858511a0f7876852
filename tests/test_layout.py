"""The layout's import rules (README, "Layout"), read from the source with ast: every import counts, also those
inside functions."""
import ast
import pathlib

import pytest

from tests.helpers import REPO_ROOT

BASE = {"albert_tf.config", "albert_tf.tokenization"}
DATA_GEN = {"data_gen", "data_gen.file_io", "data_gen.pretraining", "data_gen.readers", "data_gen.evaluation"}
# What each part may import besides itself; run_scripts may import anything and nothing imports it.
ALLOWED = {
    "albert_tf.config": set(),
    "albert_tf.tokenization": set(),
    "albert_tf.layers": BASE,
    "albert_tf.training": BASE,
    "albert_tf.models": BASE | {"albert_tf.layers"},
    "albert_tf.checkpoints": BASE | {"albert_tf.layers", "albert_tf.models"},
    "albert_tf.export": BASE | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints"},
    "albert_tf.tasks": BASE | DATA_GEN | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints",
                                          "albert_tf.export", "albert_tf.training"},
    "albert_tf.benchmarking": BASE | DATA_GEN | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints",
                                                 "albert_tf.export", "albert_tf.training", "albert_tf.tasks"},
    "albert_tf.experiments": BASE | DATA_GEN | {"albert_tf.layers", "albert_tf.models", "albert_tf.checkpoints",
                                                "albert_tf.export", "albert_tf.training", "albert_tf.tasks",
                                                "albert_tf.benchmarking"},
    "data_gen": BASE,
    "data_gen.file_io": BASE,
    "data_gen.pretraining": BASE | {"data_gen.file_io"},
    "data_gen.readers": BASE,
    # The evaluations read the readers' examples and features (SQuAD's, the CoNLL tag schemes); no reader imports
    # an evaluation.
    "data_gen.evaluation": BASE | {"data_gen.readers"},
    # The code that measures the peers, outside the installed packages: it reads what it shares with the comparison
    # that runs it (albert_tf.benchmarking.peer_protocol), and nothing installed imports it.
    "peers": {"albert_tf.benchmarking"},
}
FIRST_PARTY = ("albert_tf", "data_gen", "run_scripts", "peers")
LIBRARY = ("albert_tf", "data_gen")
CODE = LIBRARY + ("run_scripts", "peers")


def _part(module):
    """The part of the layout a dotted module name belongs to: a subpackage or top-level module of albert_tf or
    data_gen, or a top-level package."""
    parts = module.split(".")
    if parts[0] not in LIBRARY or len(parts) == 1:
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


@pytest.mark.parametrize("path", _source_files(*LIBRARY, "peers"), ids=_module_name)
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


def test_nothing_installed_imports_the_peers_code():
    offenders = [f"{_module_name(path)}:{line} imports {name}" for path in _source_files(*LIBRARY, "run_scripts")
                 for line, name in _imports(path) if name.split(".")[0] == "peers"]
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
    for path in _source_files(*CODE):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Module-level imports only: an import inside a function runs after both modules exist.
        graph[_module_name(path)] = {name for node in tree.body for _, name in _imports_of_node(node)}
    # The tree the check reads is the whole one, subpackages included.
    assert {"data_gen.pretraining.beam_pipeline", "data_gen.pretraining.create_pretraining_data",
            "data_gen.readers.squad", "data_gen.evaluation.squad_postprocess",
            "albert_tf.experiments.datasets.sentence_pair_eval"} <= set(graph)
    assert _import_cycle(graph) is None


def test_the_cycle_check_finds_a_cycle_through_a_from_import():
    graph = {"p.a": {"p.b.f"}, "p.b": {"p.c"}, "p.c": {"p.a.g"}, "p.d": {"p.a"}}
    assert _import_cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    assert _import_cycle({"p.a": {"p.b.f"}, "p.b": {"p.c"}, "p.c": set()}) is None


def _import_cycle(graph):
    """The first import cycle in `graph` (module -> the dotted names it imports: modules, or names in them), as the
    modules along it, or None."""
    state = {}

    def visit(module, trail):
        if state.get(module) == "done":
            return None
        if state.get(module) == "open":
            return trail + [module]
        state[module] = "open"
        for imported in sorted(graph.get(module, ())):
            target = imported if imported in graph else imported.rsplit(".", 1)[0]
            if target in graph and target != module:
                cycle = visit(target, trail + [module])
                if cycle:
                    return cycle
        state[module] = "done"
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle[cycle.index(cycle[-1]):]
    return None


def test_no_module_takes_another_modules_private_name():
    offenders = [f"{_module_name(path)}:{line} takes {name}" for path in _source_files(*CODE)
                 for line, name in _private_names_taken(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_private_name_check_finds_each_way_of_taking_one():
    source = ("from data_gen.pretraining import blocks, _hidden\n"
              "from data_gen.pretraining.blocks import Block, _lines\n"
              "import data_gen._old\n"
              "from data_gen._old import thing\n"
              "size = blocks._READ_CHUNK_BYTES + len(blocks.Block.__name__) + len(Block._fields)\n"
              "import json\n"
              "def f(self):\n"
              "    return self._own, json._default_encoder, data_gen._old.value\n")
    assert _private_names_taken(source) == [
        (1, "data_gen.pretraining._hidden"), (2, "data_gen.pretraining.blocks._lines"), (3, "data_gen._old"),
        (4, "data_gen._old"), (5, "blocks._READ_CHUNK_BYTES"), (8, "data_gen._old")]


def _is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_names_taken(source):
    """(line, dotted name) of each private name (`_x`, not `__x__`) the source takes from another first-party module:
    imported (`from m import _x`, `import m._x`, `from m._x import y`) or read from a module it imported (`m._x`)."""
    tree = ast.parse(source)
    modules = set()  # local names bound to first-party modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FIRST_PARTY:
                    modules.add(alias.asname or alias.name.split(".")[0])
                    if any(map(_is_private, alias.name.split("."))):
                        found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] in FIRST_PARTY:
            if any(map(_is_private, node.module.split("."))):
                found.append((node.lineno, node.module))
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
                elif _is_module(f"{node.module}.{alias.name}"):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules and not _is_private_chain(node.value):
                found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
    return sorted(found)


def _is_private_chain(node):
    """Whether an attribute chain already passes through a private name (reported there, once)."""
    while isinstance(node, ast.Attribute):
        if _is_private(node.attr):
            return True
        node = node.value
    return False


def _is_module(dotted):
    path = pathlib.Path(REPO_ROOT, *dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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


def test_child_processes_run_modules_of_this_repository_not_code_strings():
    children = []
    for path in _source_files(*LIBRARY):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # A child's module may be named by a module-level constant.
        constants = {node.targets[0].id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                     and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_python_child":
                arguments = node.args[0]
                assert isinstance(arguments, ast.List) and ast.literal_eval(arguments.elts[0]) == "-m", (
                    f"{_module_name(path)}:{node.lineno} runs a child that is not `-m MODULE`")
                module = arguments.elts[1]
                children.append(constants[module.id] if isinstance(module, ast.Name) else ast.literal_eval(module))
    assert children and all(_is_module(module) for module in children), children


MAX_LINE_LENGTH = 120


def test_no_line_of_python_is_longer_than_the_projects_limit():
    too_long = [f"{path.relative_to(REPO_ROOT)}:{number}"
                for path in _source_files(*CODE, "tests")
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if len(line) > MAX_LINE_LENGTH]
    assert not too_long, f"Lines longer than {MAX_LINE_LENGTH} characters: {', '.join(too_long)}"
