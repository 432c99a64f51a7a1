"""The import graph of resnet_nobn/ and theory/, built from every import statement at any depth
(in functions too): no circle, no arrow against the floors that docs/architecture.md draws, and a
function-level import only where it loads TensorFlow lazily. The planted tests see each fail."""
import ast
import os
import re
import shutil

from helpers import ROOT

PACKAGES = ("resnet_nobn", "theory")
# What a function-level import may put off: loading these (directly or through the module's own
# top-level imports), so that a command line is checked before TensorFlow loads.
HEAVY = ("tensorflow", "keras", "tensorflow_datasets", "tensorboard")


def modules(root):
    """{dotted name: path} of every module of PACKAGES under `root` (a package: its __init__)."""
    out = {}
    for package in PACKAGES:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, package)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)[:-3]
                    dotted = rel.replace(os.sep, ".").removesuffix(".__init__")
                    out[dotted] = os.path.join(dirpath, name)
    return out


def _in_function(tree):
    """{id(node): whether it stands inside a function} for every node of `tree`."""
    inside = {}

    def visit(node, depth):
        inside[id(node)] = depth > 0
        deeper = depth + isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, deeper)
    visit(tree, 0)
    return inside


def imports(root):
    """[(importer, imported, line, in a function)] of every import statement of PACKAGES under
    `root` that names a module of theirs, and {module: external top-level names it imports
    outside functions}."""
    known, edges, external = modules(root), [], {}
    for name, path in known.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        inside = _in_function(tree)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        external[name] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in known and target.split(".")[0] in PACKAGES:
                    target = target.rpartition(".")[0]
                if target in known:
                    if target != name:
                        edges.append((name, target, node.lineno, inside[id(node)]))
                elif not inside[id(node)]:
                    external[name].add(target.split(".")[0])
    return edges, external


def floors(root):
    """[[unit, ...] per floor, top floor first] from the code block under "## Floors" in
    docs/architecture.md; a unit is a package (`resnet_nobn/training/`) or a module
    (`resnet_nobn/cli.py`)."""
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    block = re.search(r"^## Floors\n.*?^```text\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/architecture.md has no ```text block under '## Floors'"
    return [line.split() for line in block.group(1).splitlines() if line.strip()]


def unit_of(module, units):
    """The unit of the floors that holds `module` (the longest that does), or None."""
    path = module.replace(".", "/")
    held = [u for u in units if (u.endswith("/") and (path + "/").startswith(u))
            or u == path + ".py"]
    return max(held, key=len, default=None)


def problems(root):
    """What is wrong with the import graph under `root`, one line each (empty: nothing)."""
    edges, external = imports(root)
    drawn = floors(root)
    level = {u: len(drawn) - i for i, floor in enumerate(drawn) for u in floor}
    out = []
    for module in modules(root):
        if module not in PACKAGES and unit_of(module, level) is None:
            out.append(f"{module} stands on no floor of docs/architecture.md")
    # arrows against the floors: to a higher floor, or across one floor
    for a, b, line, _ in edges:
        ua, ub = unit_of(a, level), unit_of(b, level)
        if ua and ub and ua != ub and level[ub] >= level[ua]:
            out.append(f"{a} (line {line}) imports {b}: {ua} on floor {level[ua]} may only "
                       f"import floors below it, and {ub} is on floor {level[ub]}")
    # function-level imports: only of a module that loads TensorFlow
    heavy = {}

    def loads_tensorflow(module, seen=()):
        if module not in heavy:
            heavy[module] = bool(external[module] & set(HEAVY)) or any(
                loads_tensorflow(b, seen + (module,)) for a, b, _, lazy in edges
                if a == module and not lazy and b not in seen)
        return heavy[module]
    for a, b, line, lazy in edges:
        if lazy and loads_tensorflow(a):
            out.append(f"{a} (line {line}) imports {b} inside a function, but {a} loads "
                       "TensorFlow already: import it at the top (a function-level import only "
                       "defers TensorFlow)")
        elif lazy and not loads_tensorflow(b):
            out.append(f"{a} (line {line}) imports {b} inside a function, but {b} loads no "
                       "TensorFlow: import it at the top (a function-level import only defers "
                       "TensorFlow)")
    # circles (Tarjan's strongly connected components), with the lines that close them
    graph = {}
    for a, b, line, _ in edges:
        graph.setdefault(a, {}).setdefault(b, line)
    index, low, stack, on_stack, counter = {}, {}, [], set(), [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            circle = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                circle.append(w)
                if w == v:
                    break
            if len(circle) > 1:
                ties = [f"{a} -> {b} (line {graph[a][b]})" for a in sorted(circle)
                        for b in sorted(graph.get(a, {})) if b in circle]
                out.append(f"import circle: {'; '.join(ties)}")
    for v in sorted(modules(root)):
        if v not in index:
            connect(v)
    return out


def test_the_import_graph_has_no_circle_and_follows_the_floors():
    assert problems(ROOT) == []


def test_every_floor_of_the_drawing_exists():
    for floor in floors(ROOT):
        for unit in floor:
            assert os.path.exists(os.path.join(ROOT, unit)), f"docs/architecture.md names {unit}"


def _copy(tmp_path):
    for name in PACKAGES + ("docs",):
        shutil.copytree(os.path.join(ROOT, name), tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.png"))
    return tmp_path


def _plant(path, code):
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"\n\ndef _planted():\n    {code}\n")


def test_a_circle_planted_behind_a_function_level_import_is_found(tmp_path):
    root = _copy(tmp_path)
    # config is imported by the trainer; an import back, hidden in a function, closes a circle
    _plant(root / "resnet_nobn" / "config.py", "from resnet_nobn.training import trainer")
    found = problems(root)
    assert any(p.startswith("import circle:") and "resnet_nobn.config -> resnet_nobn.training.trainer"
               in p for p in found), found


def test_an_arrow_against_the_floors_is_found(tmp_path):
    root = _copy(tmp_path)
    _plant(root / "resnet_nobn" / "model" / "blocks.py", "import resnet_nobn.study.curves")
    found = problems(root)
    assert any("resnet_nobn.model.blocks (line" in p and "may only import floors below it" in p
               for p in found), found
    assert not any(p.startswith("import circle:") for p in found), found


def test_a_function_level_import_that_defers_no_tensorflow_is_found(tmp_path):
    root = _copy(tmp_path)
    _plant(root / "resnet_nobn" / "study" / "report.py", "from resnet_nobn import recipes")
    found = problems(root)
    assert any("resnet_nobn.study.report" in p and "loads no TensorFlow" in p for p in found), found


def test_a_module_on_no_floor_is_found(tmp_path):
    root = _copy(tmp_path)
    os.makedirs(root / "resnet_nobn" / "serve")
    (root / "resnet_nobn" / "serve" / "__init__.py").write_text("")
    assert "resnet_nobn.serve stands on no floor of docs/architecture.md" in problems(root)


# One run (docs/architecture.md): the hub sequences it (main.py, the entry points' main, reads and
# decides before TensorFlow loads, then hands over to it); a spoke uses no other spoke, only the
# run directory's names and readers, the TF_CONFIG checks and recovery from a divergence (which
# the start's decision consults; it uses only the run directory's names and readers itself, and
# the checkpoints it deletes through the function the hub hands it).
HUBS = ("resnet_nobn.training.trainer", "resnet_nobn.training.main")
SHARED = ("resnet_nobn.training.rundir", "resnet_nobn.training.tf_config",
          "resnet_nobn.training.recovery", "resnet_nobn.training")


def spokes_using_spokes(root):
    """["importer -> imported (line N)"] of each module of resnet_nobn/training/ other than the hub
    that imports another of its spokes."""
    edges, _ = imports(root)
    return [f"{a} -> {b} (line {line})" for a, b, line, _ in edges
            if a.startswith("resnet_nobn.training.") and b.startswith("resnet_nobn.training.")
            and a not in HUBS and b not in SHARED]


def test_the_spokes_of_one_run_use_no_other_spoke():
    assert spokes_using_spokes(ROOT) == []


def test_a_spoke_that_calls_another_is_found(tmp_path):
    root = _copy(tmp_path)
    _plant(root / "resnet_nobn" / "training" / "results.py", "from resnet_nobn.training import checkpoints")
    found = spokes_using_spokes(root)
    assert any(p.startswith("resnet_nobn.training.results -> resnet_nobn.training.checkpoints (line")
               for p in found), found


def test_recovery_that_calls_the_checkpoints_itself_is_found(tmp_path):
    """recovery.py is shared by the spokes of the start, so it may use no spoke itself: it deletes
    checkpoints only through the function the hub hands it."""
    root = _copy(tmp_path)
    _plant(root / "resnet_nobn" / "training" / "recovery.py",
           "from resnet_nobn.training import checkpoints")
    found = spokes_using_spokes(root)
    assert any(p.startswith("resnet_nobn.training.recovery -> resnet_nobn.training.checkpoints "
                            "(line") for p in found), found


MAX_LINES = 500  # past this many lines a module is a sign of two jobs (docs/architecture.md)


def modules_without_their_job(root):
    """[(path, why)] of the Python files of the library, theory, entry points, benchmarks and
    experiments that do not name their one job in the first line of their docstring, or run past
    MAX_LINES: a module does one job, named there; its length follows the job."""
    out = []
    for top in PACKAGES + ("run", "bench", "experiments"):
        for where, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(where, name)
                with open(path) as f:
                    text = f.read()
                rel = os.path.relpath(path, root)
                doc = ast.get_docstring(ast.parse(text)) or ""
                if not doc.strip() and text.strip():  # an empty __init__.py names nothing
                    out.append((rel, "no docstring naming its job"))
                n = text.count("\n")
                if n > MAX_LINES:
                    out.append((rel, f"{n} lines"))
    return out


def test_every_module_names_its_job_and_stays_short_of_two():
    assert modules_without_their_job(ROOT) == []


def test_a_module_without_its_job_or_of_two_jobs_is_found(tmp_path):
    root = _copy(tmp_path)
    (root / "resnet_nobn" / "long.py").write_text('"""One job."""\n' + "x = 1\n" * MAX_LINES)
    (root / "resnet_nobn" / "nameless.py").write_text("x = 1\n")
    assert modules_without_their_job(root) == [
        (os.path.join("resnet_nobn", "long.py"), f"{MAX_LINES + 1} lines"),
        (os.path.join("resnet_nobn", "nameless.py"), "no docstring naming its job")]
