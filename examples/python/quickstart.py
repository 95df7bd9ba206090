"""A first look at StrideWeave from Python: layouts, tensors on carriers, operations,
gradients and a move to another carrier. Run it with `python examples/python/quickstart.py`."""

import strideweave as sw


def main() -> None:
    # Layouts in CuTe's notation, evaluated first mode fastest.
    layout = sw.Layout("(4,(2,3)):(1,(4,8))")
    print("layout", layout, "size", layout.size, "cosize", layout.cosize)
    print("index of (3, (1, 2)):", layout((3, (1, 2))))
    print("divide by 4:2 ->", sw.Layout("(4,2,3):(2,1,8)").divide(sw.Layout("4:2")))

    # A 2x3 matrix on the CPU carrier, written column-major, and a zero-copy row view.
    matrix = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), (2, 3))
    row = matrix[1, :]
    assert isinstance(row, sw.Tensor)  # a key with a slice is a view
    row[2] = -1.0
    print("matrix", matrix.to_list(), "version", matrix.version)

    # Operations and gradients.
    w = sw.Tensor.compact(sw.CPU.from_values([0.5, -1.0]), (1, 2))
    w.requires_grad = True
    x = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), (2, 2))
    loss = sw.reduce_sum(w @ x)
    loss.backward()
    grad = w.grad
    assert grad is not None
    print("loss", loss.to_list(), "d loss / d w", grad.to_list())

    # Move the matrix to a file; the CPU carrier is released.
    on_disk = sw.move(matrix, sw.FileBacked(dtype=sw.DType.Float32))
    print("on disk", on_disk.to_list(), "source released", matrix.carrier.is_released())


if __name__ == "__main__":
    main()
