"""ti.ad.torch_function's outputs come from user factories: one smaller than the kernel writes
is an error naming it (before: the kernel wrote past its end and the process died), one sharing
memory with an input or another output is refused (before: a wrong gradient)."""
import pytest

torch = pytest.importorskip("torch")

import fluxion as ti  # noqa: E402
from fluxion.ir.errors import FluxionOutOfBoundsError, FluxionTypeError  # noqa: E402


def _square():
    @ti.kernel
    def square(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = x[i] ** 2

    return square


def test_an_output_smaller_than_the_kernel_writes_is_an_error_naming_it():
    op = ti.ad.torch_function(_square(), outputs={"y": lambda x: torch.empty(3)})
    x = torch.arange(1 << 16, dtype=torch.float32, requires_grad=True)
    with pytest.raises(FluxionOutOfBoundsError, match=r"(?s)output.*'y' \(3,\).*ndarray argument 'y'"):
        op(x)
    # the right size still works, and differentiates
    op = ti.ad.torch_function(_square(), outputs={"y": lambda x: torch.empty_like(x)})
    y = op(x[:5])
    y.sum().backward()
    assert torch.equal(x.grad[:5], 2 * x[:5].detach())


@pytest.mark.parametrize("factory", [lambda x: x.detach(), lambda x: x.detach()[:],
                                     lambda x: x.detach().view(2, 2)[0].view(-1)])
def test_an_output_sharing_memory_with_an_input_is_refused(factory):
    op = ti.ad.torch_function(_square(), outputs={"y": lambda x: factory(x)[:x.shape[0]]})
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    with pytest.raises(FluxionTypeError, match="output 'y' shares memory with input 'x'"):
        op(x)
    assert x.grad is None and torch.equal(x.detach(), torch.tensor([1.0, 2.0, 3.0, 4.0]))


def test_two_outputs_sharing_memory_are_refused_and_separate_ones_are_right():
    @ti.kernel
    def two(x: ti.types.ndarray(), a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in x:
            a[i] = x[i] * 3.0
            b[i] = x[i] * x[i]

    shared = torch.empty(8)
    op = ti.ad.torch_function(two, outputs={"a": lambda x: shared[:4], "b": lambda x: shared[2:6]})
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    with pytest.raises(FluxionTypeError, match="output 'b' shares memory with output 'a'"):
        op(x)
    op = ti.ad.torch_function(two, outputs={"a": lambda x: torch.empty_like(x),
                                            "b": lambda x: torch.empty_like(x)})
    a, b = op(x)
    (a.sum() + b.sum()).backward()
    assert torch.equal(x.grad, 3.0 + 2 * x.detach())


def test_outputs_in_disjoint_parts_of_one_buffer_are_fine():
    @ti.kernel
    def two(x: ti.types.ndarray(), a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in x:
            a[i] = x[i] * 3.0
            b[i] = x[i] * x[i]

    buf = torch.zeros(12)
    x = buf[8:]
    x.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    op = ti.ad.torch_function(two, outputs={"a": lambda x: buf[:4], "b": lambda x: buf[4:8]})
    a, b = op(x)
    assert torch.equal(a, 3 * x) and torch.equal(b, x * x)
