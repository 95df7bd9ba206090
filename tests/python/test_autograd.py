"""Autograd from Python: requires_grad, backward, .grad, grad() and no_grad()."""

import pytest

import strideweave as sw
from conftest import cpu_tensor


def test_backward_accumulates_into_leaves() -> None:
    w = cpu_tensor([0.5, -1.0], (1, 2))
    w.requires_grad = True
    x = cpu_tensor([1.0, 2.0, 3.0, 4.0], (2, 2))
    loss = sw.reduce_sum(w @ x)
    assert loss.grad_fn == "reduce_sum" and not loss.is_leaf and w.is_leaf
    loss.backward()
    assert w.grad is not None
    assert w.grad.to_list() == [[3.0, 7.0]]
    assert x.grad is None


def test_grad_returns_gradients_without_touching_dot_grad() -> None:
    b = cpu_tensor([1.0, 2.0], (1, 2))
    b.requires_grad = True
    out = sw.reduce_sum(b * b)
    (gb,) = sw.grad(out, [b])
    assert gb is not None and gb.to_list() == [[2.0, 4.0]]
    assert b.grad is None


def test_no_grad_records_nothing_and_restores_the_mode() -> None:
    w = cpu_tensor([1.0, 2.0], (2,))
    w.requires_grad = True
    assert sw.is_grad_enabled()
    with sw.no_grad():
        assert not sw.is_grad_enabled()
        y = w + w
        assert not y.requires_grad and y.grad_fn is None
        with sw.set_grad_enabled(True):
            assert sw.is_grad_enabled()
            assert (w + w).requires_grad
        assert not sw.is_grad_enabled()
    assert sw.is_grad_enabled()
    with pytest.raises(KeyError):
        with sw.no_grad():
            raise KeyError("inside")
    assert sw.is_grad_enabled()


def test_requires_grad_is_checked() -> None:
    t = cpu_tensor([1, 2], (2,), sw.DType.Int32)
    with pytest.raises(TypeError, match="requires_grad must be a bool, got int"):
        t.requires_grad = 1
    with pytest.raises(RuntimeError, match="a Int32 tensor is not differentiable"):
        t.requires_grad = True
    assert not t.requires_grad
    with pytest.raises(TypeError, match="set_grad_enabled mode must be a bool, got int"):
        sw.set_grad_enabled(1)


def test_backward_without_gradient_needs_one_element() -> None:
    w = cpu_tensor([1.0, 2.0], (2,))
    w.requires_grad = True
    y = w + w
    with pytest.raises(ValueError):
        y.backward()
    assert w.grad is None
    y.backward(cpu_tensor([1.0, 1.0], (2,)))
    assert w.grad is not None and w.grad.to_list() == [2.0, 2.0]
