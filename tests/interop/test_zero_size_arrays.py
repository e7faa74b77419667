"""Arrays with no elements, whatever their strides (torch gives an empty transposed or
expanded tensor any strides and still calls it contiguous): the kernel runs zero iterations."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fluxion as ti  # noqa: E402

MAKERS = {
    "numpy": lambda s: np.zeros(s, np.float32),
    "numpy_fortran": lambda s: np.zeros(s, np.float32, order="F"),
    "numpy_strided": lambda s: np.zeros((2 * s[0], 2 * s[1]), np.float32)[::2, ::2],
    "torch": lambda s: torch.zeros(s),
    "torch_transposed": lambda s: torch.zeros(s[::-1]).t(),
    "torch_expanded": lambda s: torch.zeros(1, s[1]).expand(s[0], s[1]),
    "ti_ndarray": lambda s: ti.ndarray(ti.f32, s),
}


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
@pytest.mark.parametrize("kind", list(MAKERS))
def test_zero_size_2d_arrays_run_zero_iterations(kind, shape):
    visits = ti.field(ti.i32, ())

    @ti.kernel
    def walk(a: ti.types.ndarray(ndim=2)) -> ti.f32:
        s = 0.0
        for i, j in a:
            visits[None] += 1
            s += a[i, j]
        return s

    @ti.kernel
    def by_shape(a: ti.types.ndarray(ndim=2)):
        for i, j in ti.ndrange(a.shape[0], a.shape[1]):
            visits[None] += 1

    a = MAKERS[kind](shape)
    assert walk(a) == 0.0
    by_shape(a)
    assert visits[None] == 0
