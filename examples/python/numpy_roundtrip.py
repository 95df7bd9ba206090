"""numpy and StrideWeave share memory: `np.asarray(t)` views a CPU tensor's slots without a
copy, and `strideweave.from_numpy` builds a tensor over an array's memory. Run it with
`python examples/python/numpy_roundtrip.py` (numpy installed)."""

import numpy as np

import strideweave as sw


def main() -> None:
    # An array becomes a tensor over the same memory: one mode per axis, t[i, j] == x[i, j].
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = sw.from_numpy(x)
    print("shared", np.shares_memory(np.asarray(t), x), "shape", t.shape, "layout", t.layout)

    # Operations run on it and make fresh CPU tensors, which numpy views without a copy.
    y = t * 2.0 + t
    view = np.asarray(y)
    print("y", view.tolist(), "read-only", not view.flags.writeable)

    # While the view lives, the tensor's slots are frozen: writes are refused.
    try:
        y[0, 0] = -1.0
    except RuntimeError as error:
        print("write refused:", str(error).split(":")[1].strip())
    del view
    y[0, 0] = -1.0
    print("after the view is gone", y[0, 0], "version", y.version)

    # A layout numpy cannot express is an error, never a wrong view; np.array copies it.
    tiled = sw.Tensor(sw.CPU.from_values([float(i) for i in range(12)]), 0,
                      sw.Layout("((2,2),3):((1,6),2)"))
    try:
        np.asarray(tiled)
    except ValueError:
        print("tiled layout copied:", np.array(tiled).shape)


if __name__ == "__main__":
    main()
