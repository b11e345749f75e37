"""docs/architecture.md stays true: it names every module of kafka_ds/, the package has no
import cycles (imports inside functions and under TYPE_CHECKING included), at most ten
modules sit directly in kafka_ds/, the package carries no test switches or reads of
pyspark's private stack frames, the Spark-facing modules import nothing heavy, and no module
(500 lines), class (275) or benchmark script (600) grows past its size."""

import ast
import fnmatch
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "kafka_ds")


def modules():
    """{dotted name: path} of every module of kafka_ds (a package by its __init__.py)."""
    found = {}
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


def import_graph(found):
    """{module: modules it imports}, every ``from ... import`` of kafka_ds in the file."""
    graph = {}
    for name, path in found.items():
        tree = ast.parse(open(path).read())
        package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in found else base)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {t for t in targets if t in found and t != name}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return out


def test_no_import_cycles():
    assert cycles(import_graph(modules())) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_at_most_ten_modules_directly_in_the_package():
    top = [name for name in os.listdir(PACKAGE) if name.endswith(".py")]
    assert len(top) <= 10, sorted(top)


def named_in_tree(text):
    """{folder relative to kafka_ds ("" for the top): file names and patterns named in it},
    from the page's tree drawing: a line's names belong to the innermost folder opened on a
    line indented less than it (or on the line itself)."""
    named, folders = {}, []  # folders: (indent, path) of the open folders
    for line in text.splitlines():
        if not line.strip() or line.strip().startswith("```"):
            continue
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        opened = re.match(r"\s*([\w]+)/", line)
        if opened:
            parent = folders[-1][1] if folders else ""
            folders.append((indent, f"{parent}{opened.group(1)}/"))
        where = folders[-1][1] if folders else ""
        named.setdefault(where, set()).update(re.findall(r"[\w*]+\.py", line))
    return named


def test_architecture_page_names_every_module():
    """Every module's file name appears in the page's tree under its own folder, or a
    pattern there (``avro*.py``, ``*_declarations.py``) covers it; a package's
    ``__init__.py`` is named by its folder."""
    page = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    tree = page[page.index("```", page.index("## The tree")) : page.index("What may import what")]
    named = named_in_tree(tree[tree.index("kafka_ds/") + len("kafka_ds/") :])
    missing = []
    for path in modules().values():
        relative = os.path.relpath(path, PACKAGE)
        folder = os.path.dirname(relative) + "/" if os.path.dirname(relative) else ""
        if os.path.basename(path) == "__init__.py" and (folder in named or not folder):
            continue
        if not any(
            fnmatch.fnmatch(os.path.basename(path), pattern) for pattern in named.get(folder, ())
        ):
            missing.append(relative)
    assert missing == [], "docs/architecture.md does not name: " + ", ".join(sorted(missing))


def test_the_tree_reader_places_names_in_their_folders():
    named = named_in_tree("  a.py\n  read/    x.py\n    y.py\n  b.py\n  c/  d/ e.py\n")
    assert named == {"": {"a.py", "b.py"}, "read/": {"x.py", "y.py"}, "c/": {"e.py"}}


def test_no_test_switches_or_stack_frames_in_the_package():
    forbidden = re.compile(r"sys\._getframe|\bf_locals\b|KAFKA_DS_TEST|pyspark\.sql\.worker")
    hits = []
    for path in modules().values():
        for number, line in enumerate(open(path), 1):
            if forbidden.search(line):
                hits.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()}")
    assert hits == []


@pytest.mark.parametrize(
    "module", ["kafka_ds.source", "kafka_ds.reader", "kafka_ds.writer", "kafka_ds.stream"]
)
def test_spark_facing_modules_import_nothing_heavy(module):
    """Spark unpickles the source, its readers and writers in Python processes of their own
    (schema(), partitions(), writer(), commit(), every task): importing these modules must
    not load pandas, numpy or pyarrow -- those load inside read/write, where needed. A
    fresh interpreter, so nothing is loaded already."""
    code = (
        f"import sys; import {module}; "
        "print(sorted(m for m in ('pandas', 'numpy', 'pyarrow') if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    assert out == "[]", f"importing {module} loads {out}"


# --- room sizes: split by concern before a file or a class grows past these -----------------

#: lines of a kafka_ds module, of a class in it, and of a benchmark script (issue #46: the
#: four modules, four classes and four scripts past them were split by concern)
MODULE_LINES, CLASS_LINES, BENCHMARK_LINES = 500, 275, 600


def _lines(path):
    with open(path) as f:
        return sum(1 for _ in f)


def test_no_module_or_class_of_the_package_is_too_big():
    too_big = []
    for name, path in sorted(modules().items()):
        if _lines(path) > MODULE_LINES:
            too_big.append(f"module {name}: {_lines(path)} lines (at most {MODULE_LINES})")
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ClassDef):
                length = node.end_lineno - node.lineno + 1
                if length > CLASS_LINES:
                    too_big.append(
                        f"class {name}.{node.name}: {length} lines (at most {CLASS_LINES})"
                    )
    assert not too_big, "split by concern:\n" + "\n".join(too_big)


def test_no_benchmark_script_is_too_big():
    folder = os.path.join(ROOT, "benchmarks")
    too_big = [
        f"benchmarks/{name}: {_lines(os.path.join(folder, name))} lines"
        for name in sorted(os.listdir(folder))
        if name.endswith(".py") and _lines(os.path.join(folder, name)) > BENCHMARK_LINES
    ]
    assert not too_big, f"at most {BENCHMARK_LINES} lines; split by concern:\n" + "\n".join(too_big)
