"""The documentation's example is the one the tests run; the stubs are complete."""

import ast
import re

import kvroute
from conftest import REPO

EXAMPLE = (REPO / "python" / "examples" / "quickstart.py").read_text()


def python_blocks(markdown):
    return re.findall(r"```python\n(.*?)```", markdown, re.S)


def test_the_readmes_python_example_is_the_quickstart_example():
    section = (REPO / "README.md").read_text().split("## Python", 1)[1]
    assert python_blocks(section)[0] == EXAMPLE


def stub_names():
    tree = ast.parse((REPO / "python" / "kvroute" / "_kvroute.pyi").read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    return top, members


def test_the_stubs_declare_every_name_of_the_module():
    top, members = stub_names()
    module = kvroute._kvroute
    public = {n for n in dir(module) if not n.startswith("__")} | {"__version__"}
    assert public <= top
    for cls in ("Router", "Selection", "Dispatch", "Worker"):
        # Only a Router is made from Python: the others' __init__ raises.
        attrs = {n for n in dir(getattr(module, cls))
                 if not n.startswith("_") or n in ("__bool__", "__enter__", "__exit__",
                                                   "__len__", "__contains__")}
        if cls == "Router":
            attrs.add("__init__")
        assert attrs <= members[cls], (cls, attrs - members[cls])
    assert set(kvroute.__all__) <= top
