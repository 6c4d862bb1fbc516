"""The repository's shape: layers import one way, optional frameworks stay optional, packaging works."""

import ast
import graphlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["kernels", "autodiff", "geometry", "sim", "render", "apps"]
OPTIONAL = ["torch", "jax", "cupy", "cuda", "pxr", "trimesh", "pyvista", "PIL", "matplotlib"]


def imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level >= 2:
                found.add(mod.split(".")[0])
            elif mod.startswith("loomwork."):
                found.add(mod.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("loomwork."):
                    found.add(alias.name.split(".")[1])
    return found & set(LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_layers_import_downward_only(layer):
    """kernels <- autodiff <- geometry <- sim <- apps: no module imports a layer above its own."""
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    for path in (ROOT / layer).rglob("*.py"):
        bad = imported_layers(path) - allowed
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)} from above its layer"


# kernels/ from the bottom up: a module may import only modules listed before it (locally too)
KERNEL_ORDER = [
    "errors", "config", "logger", "types", "ir", "builtins", "builtin_params", "extensions", "cache", "build",
    "backend", "cpu", "cuda",
    "memory", "device", "stream", "dlpack", "foreign", "array", "interop", "annotations", "utils", "functions",
    "structs", "mathlib", "codegen", "simd", "frontend", "callforms", "tiles", "tiles_block", "tiles_indexed",
    "tiles_fft",
    "tiles_lanes", "module", "launch", "capture", "timing",
    "runtime", "mapping", "torch_bridge", "jax_cpu", "jax_bridge", "__init__",
]


def kernel_imports(path: Path) -> set[str]:
    """The kernels/ modules a kernels/ file imports, at top level or inside functions (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                   and node.test.id == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only or not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 1:
            found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        elif (node.module or "").startswith("loomwork.kernels."):
            found.add(node.module.split(".")[2])
    return found - {path.stem}


def test_kernel_layer_has_no_import_cycles_and_imports_downward():
    """Inside kernels/ the imports form no cycle, and each module imports only those below it in KERNEL_ORDER."""
    files = {p.stem: p for p in (ROOT / "kernels").glob("*.py")}
    assert set(files) == set(KERNEL_ORDER), "place every kernels/ module in KERNEL_ORDER"
    graph = {name: kernel_imports(path) & set(files) for name, path in files.items()}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle
    for name, deps in graph.items():
        above = {d for d in deps if KERNEL_ORDER.index(d) > KERNEL_ORDER.index(name)}
        assert not above, f"kernels/{name}.py imports {sorted(above)} from above it"


BACKEND_FILES = {"backend.py", "cpu.py", "cuda.py", "jax_cpu.py"}  # the backend interface and its implementations


class _DeviceKindTests(ast.NodeVisitor):
    """Collects tests of a device's kind (`.is_cpu`, `.is_cuda`, `.alias == "cpu"`, `.alias.startswith(...)`)
    and direct uses of the CPU runtime or compiler, outside the definitions of the public properties."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # noqa: N802 - ast.NodeVisitor's naming
        if node.name not in ("is_cpu", "is_cuda"):  # Device.is_cpu / is_cuda themselves stay
            self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
        if node.attr in ("is_cpu", "is_cuda", "cpu_runtime", "build_cpu"):
            self.found.append((node.lineno, f".{node.attr}"))
        if node.attr == "startswith" and isinstance(node.value, ast.Attribute) and node.value.attr == "alias":
            self.found.append((node.lineno, ".alias.startswith"))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:  # noqa: N802
        if node.id in ("cpu_runtime", "build_cpu"):
            self.found.append((node.lineno, node.id))

    def visit_Compare(self, node: ast.Compare) -> None:  # noqa: N802
        sides = [node.left, *node.comparators]
        if any(isinstance(s, ast.Attribute) and s.attr == "alias" for s in sides) and any(
                isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides):
            self.found.append((node.lineno, "alias compared with a string"))
        self.generic_visit(node)


def test_only_backends_branch_on_the_device_kind():
    """Outside the backend files, the kernel layer asks `device.backend` instead of testing the device's kind
    (the public Device.is_cpu / is_cuda properties stay), and reaches the CPU runtime and compiler only through
    the CPU backend."""
    for path in sorted((ROOT / "kernels").glob("*.py")):
        if path.name in BACKEND_FILES:
            continue
        visitor = _DeviceKindTests()
        visitor.visit(ast.parse(path.read_text()))
        assert not visitor.found, f"kernels/{path.name} tests the device kind: {visitor.found}"


def test_import_loads_no_optional_framework():
    """`import loomwork` needs only NumPy: no torch, jax, cupy, cuda-python, usd, trimesh, pyvista, imaging."""
    code = ("import sys, loomwork; bad = [m for m in sys.modules if m.split('.')[0] in "
            f"{OPTIONAL!r}]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_are_exported_once():
    """Every name in loomwork.__all__ exists, and none is listed twice."""
    import loomwork

    assert len(loomwork.__all__) == len(set(loomwork.__all__))
    for name in loomwork.__all__:
        assert hasattr(loomwork, name), name


def test_non_editable_install_ships_the_native_files(tmp_path):
    """`pip install .` lays out the package with its native headers, and a kernel runs from there."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(ROOT)], check=True, capture_output=True, text=True)
    assert (target / "loomwork" / "kernels" / "native" / "loomwork.h").exists()
    assert (target / "loomwork" / "geometry" / "native" / "hash_grid.h").exists()
    code = ("import numpy as np, loomwork as wp\n"
            "@wp.kernel\n"
            "def k(a: wp.array(dtype=float)):\n"
            "    a[wp.tid()] = 2.0\n"
            "a = wp.zeros(3, dtype=float); wp.launch(k, dim=3, inputs=[a]); print(wp.__file__, a.numpy().sum())\n")
    script = tmp_path / "use.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(target), LOOMWORK_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    path, total = out.stdout.split()
    assert path.startswith(str(target)) and float(total) == 6.0


def test_editable_install_points_at_the_source_tree():
    """The test environment's loomwork is the working tree (pip install -e .)."""
    import loomwork.kernels

    assert Path(loomwork.kernels.__file__).resolve().parent == ROOT / "kernels"
