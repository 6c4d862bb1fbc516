"""The kernel layer's extension registry: a package adds native headers, value types and builtins (with
explicit adjoints, out parameters) from its own files, and their names become public."""

import os
import subprocess
import sys
import textwrap

import pytest

import loomwork as wp
from loomwork.kernels import builtins as B
from loomwork.kernels import extensions

PROGRAM = textwrap.dedent('''
    import sys
    from pathlib import Path
    import numpy as np
    import loomwork as wp
    from loomwork.kernels.builtins import Exact, Out
    from loomwork.kernels.extensions import add_builtin, register_header, register_value_type

    header = register_header(Path(sys.argv[1]))
    add_builtin("ext_scale", (Exact(wp.float32),), wp.float32, "lw::ext_scale", adjoint="lw::ext_adj_scale",
                header=header, group="Test", doc="x times the header's factor")
    pair_t = register_value_type("ext_pair_t", "lw::ext_pair_t", [("a", wp.int32), ("b", wp.float32)],
                                 header=header, readable=("a",))
    add_builtin("ext_pair", (Exact(wp.int32),), pair_t, "lw::ext_pair", header=header, group="Test", doc="",
                differentiable=False)
    add_builtin("ext_split", (Exact(wp.float32), Out(wp.int32)), wp.float32, "lw::ext_split", header=header,
                group="Test", doc="", differentiable=False)
    add_builtin("ext_powers", (Exact(wp.float32), Out(wp.float32), Out(wp.float32)), None, "lw::ext_powers",
                adjoint="lw::ext_adj_powers", header=header, group="Test", doc="x^2 and x^3 into two outputs")

    @wp.kernel
    def uses(x: wp.array(dtype=float), y: wp.array(dtype=float), n: wp.array(dtype=int)):
        i = wp.tid()
        whole = int(0)
        frac = wp.ext_split(x[i], whole)
        sq = float(0.0)
        cube = float(0.0)
        wp.ext_powers(x[i], sq, cube)
        y[i] = wp.ext_scale(x[i]) + frac + sq - cube
        n[i] = whole + wp.ext_pair(i).a

    @wp.kernel(module="unique")
    def other(y: wp.array(dtype=float)):
        y[wp.tid()] = 1.0

    x = wp.array(np.array([1.5, 2.25], dtype=np.float32), requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    n = wp.zeros(2, dtype=int)
    tape = wp.Tape()
    with tape:
        wp.launch(uses, dim=2, inputs=[x, y, n])
    tape.backward(grads={y: wp.ones(2, dtype=float)})
    wp.launch(other, dim=2, inputs=[wp.zeros(2, dtype=float)])
    print(y.numpy().tolist(), n.numpy().tolist(), x.grad.numpy().tolist(), "ext_scale" in wp.__all__)
''')

HEADER = '''
#pragma once
namespace lw {
struct ext_pair_t { int32_t a; float b; };
LW_FUNC float ext_scale(float x) { return FACTOR * x; }
LW_FUNC void ext_adj_scale(float x, float& adj_x, float adj_ret) { adj_x += FACTOR * adj_ret; }
LW_FUNC ext_pair_t ext_pair(int32_t i) { return ext_pair_t{i * 10, 0.5f}; }
LW_FUNC float ext_split(float x, int32_t& whole) { whole = (int32_t)x; return x - (float)whole; }
LW_FUNC void ext_powers(float x, float& sq, float& cube) { sq = x * x; cube = x * x * x; }
template <class R> LW_FUNC void ext_adj_powers(float x, float& adj_x, const R& adj) {
    adj_x += 2.0f * x * adj.f0 + 3.0f * x * x * adj.f1;
}
}
'''


def run(tmp_path, factor: float) -> tuple[str, set]:
    header = tmp_path / "ext" / "ext.h"
    header.parent.mkdir(exist_ok=True)
    header.write_text(HEADER.replace("FACTOR", f"{factor}f"))
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    cache = tmp_path / "cache"
    env = dict(os.environ, LOOMWORK_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, str(script), str(header)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip(), set(os.listdir(cache))


def test_extension_header_builtins_and_rebuilds(tmp_path):
    """A header registered from outside kernels/ is included where used, its builtins run (an out parameter, a
    value type's readable field, an explicit adjoint), and editing it rebuilds only the module that uses it."""
    first, entries = run(tmp_path, 2.0)
    assert first == "[2.375, -1.578125] [1, 12] [-1.75, -8.6875] True"
    second, after = run(tmp_path, 3.0)
    assert second == "[3.875, 0.671875] [1, 12] [-0.75, -7.6875] True"
    rebuilt = {e.rsplit("-", 1)[0] for e in after - entries}
    assert rebuilt == {"__main__", "__main__-adj"}, after - entries  # not the unique module, nor the runtime


def test_differentiable_extension_rows_need_an_adjoint(tmp_path):
    """An extension's differentiable overload must name its adjoint; special forms cannot be redefined."""
    header = tmp_path / "h.h"
    header.write_text("#pragma once\n")
    h = extensions.register_header(header)
    try:
        with pytest.raises(ValueError, match="needs its adjoint symbol"):
            extensions.add_builtin("ext_no_adjoint", (B.Exact(wp.float32),), wp.float32, "lw::f", header=h,
                                   group="Test", doc="")
        with pytest.raises(ValueError, match="special form"):
            extensions.add_builtin("tid", (), wp.int32, "lw::t", header=h, group="Test", doc="",
                                   differentiable=False)
    finally:
        extensions.registry.headers.pop(header.resolve())
    with pytest.raises(FileNotFoundError):
        extensions.register_header(tmp_path / "missing.h")


def test_value_type_fields_are_checked():
    """Reading a field a value type does not expose names the readable ones."""

    def k(grid: wp.uint64):
        q = wp.hash_grid_query(grid, wp.vec3(0.0), 1.0)
        print(q.secret)

    with pytest.raises(AttributeError, match="has no field 'secret'"):
        wp.launch(wp.kernel(k, module="unique"), dim=1, inputs=[0])


def test_builtins_exported_later_become_public_names():
    """A name exported after `import loomwork` is an attribute of the package and listed in __all__."""
    marker = object()
    extensions.export_name("_test_exported_marker", marker)
    try:
        assert wp._test_exported_marker is marker and "_test_exported_marker" in wp.__all__
    finally:
        wp.__all__.remove("_test_exported_marker")
        del wp._test_exported_marker
        extensions.registry.exports.pop("_test_exported_marker")


def test_geometry_builds_on_the_registry_without_editing_kernels():
    """The geometry package's builtins come from its own header, and the kernel layer names none of them."""
    from pathlib import Path

    ov = B.candidates("hash_grid_query_next")[0]
    assert ov.header.path.parent.parent.name == "geometry" and ov.outputs == (0, 1)
    kernels_dir = Path(wp.__file__).resolve().parent.parent / "kernels"
    for f in kernels_dir.rglob("*"):
        if f.is_file():
            assert "hash_grid" not in f.read_text(errors="ignore"), f
