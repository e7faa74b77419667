"""Errors of Python-scope misuse carry the original system's words and exception classes
(programs and tests written for it catch and match them), followed by fluxion's own
explanation."""
import numpy as np
import pytest

import fluxion as ti


def test_field_index_count_and_slices():
    x = ti.field(ti.i32, shape=(1, 2, 3))
    with pytest.raises(AssertionError, match="Slicing is not supported on ti.field") as e:
        x[0, 0] = 1
    assert isinstance(e.value, ti.FluxionIndexError)
    with pytest.raises(TypeError, match=r"Detected illegal element of type: slice\. Please be "
                                        r"aware that slicing a ti.field is not supported"):
        x[0, :]


def test_gradients_need_floats():
    with pytest.raises(RuntimeError, match="i32 is not supported for field with "
                                           "`needs_grad=True` or `needs_dual=True`"):
        ti.field(ti.i32, shape=1, needs_dual=True)
    with pytest.raises(RuntimeError, match="i32 is not supported for ndarray"):
        ti.ndarray(ti.i32, shape=3, needs_grad=True)


def test_tape_loss_must_be_one_element_with_gradient():
    @ti.kernel
    def total(a: ti.types.ndarray(), p: ti.types.ndarray()):
        for i in a:
            p[0] += a[i]

    a = ti.ndarray(ti.f32, shape=4, needs_grad=True)
    two = ti.ndarray(ti.f32, shape=2, needs_grad=True)
    with pytest.raises(RuntimeError, match="The loss of `Tape` must be an ndarray with only "
                                           "one element"):
        with ti.ad.Tape(loss=two):
            total(a, two)
    no_grad = ti.ndarray(ti.f32, shape=1)
    with pytest.raises(RuntimeError, match="please set needs_grad=True for all ndarrays"):
        with ti.ad.Tape(loss=no_grad):
            total(a, no_grad)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="The loss of `Tape` must be a tensor only contains "
                                           "one element"):
        with ti.ad.Tape(loss=torch.ones(2, requires_grad=True)):
            pass
    with pytest.raises(RuntimeError, match="please set requires_grad=True for all tensors"):
        with ti.ad.Tape(loss=torch.ones(1)):
            pass
    assert np.all(a.to_numpy() == 0)


def test_matrix_entries_placed_with_different_shapes():
    a = ti.Matrix.field(2, 2, ti.i32)
    ti.root.dense(ti.i, 10).place(a.get_scalar_field(0, 0))
    with pytest.raises(RuntimeError, match="Members of the following field have different "
                                           "shapes"):
        ti.root.dense(ti.i, 11).place(a.get_scalar_field(0, 1))


def test_tape_lists_its_calls_and_modes():
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def step():
        for i in x:
            loss[None] += x[i] * x[i]

    with ti.ad.Tape(loss=loss) as t:
        step()
        step()
    assert [k for k, _ in t.calls] == [step, step] and len(t.modes) == 2


def test_tape_validation_without_debug_warns_in_the_original_words():
    x = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        x[None] = 1.0

    with pytest.warns(UserWarning) as record:
        with ti.ad.Tape(loss=x, validation=True):
            k()
    words = ("Debug mode is disabled, autodiff valid check will not work. Please specify "
             "`ti.init(debug=True)` to enable the check.")
    assert any(words in str(w.message) for w in record), [str(w.message) for w in record]
