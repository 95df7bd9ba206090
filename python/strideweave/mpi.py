"""StrideWeave over MPI: data-parallel collectives and cluster memory as a tier.

The Rust crate ``strideweave-mpi`` from Python (docs/distributed.md, "From Python"):

- :func:`init` starts MPI for StrideWeave and returns the world :class:`Communicator`. When
  ``mpi4py`` is in use (``mpi4py.MPI`` imported, or an ``mpi4py`` communicator given), MPI is
  *adopted*: ``mpi4py`` initialized it and finalizes it. Otherwise StrideWeave initializes MPI
  itself and finalizes it at interpreter exit.
- :func:`all_reduce` (``"sum"`` or ``"mean"``, differentiable) and :func:`average_gradients`
  take a :class:`Communicator` or an ``mpi4py`` communicator (converted once through
  ``comm.py2f()`` and duplicated, so StrideWeave's messages never meet the caller's).
- :class:`Cluster` lends the memory of every rank but one, the client, to that client:
  ``cluster.memory_from_values(values)`` is a ``ClusterMemory`` carrier whose slots the
  other ranks hold, and :func:`cluster_local` / :func:`upload` make ``ClusterLocal`` carriers
  and tensors on the client, the primary tier that computes. A ``TiledEvictable`` over a
  ``ClusterLocal`` primary and a ``ClusterMemory`` secondary streams the tensor through the
  client.

The module needs an extension built with the cargo feature ``mpi`` (``make develop`` does;
``MATURIN_PEP517_ARGS="--features mpi" pip install .``); without it every function raises
``NotImplementedError`` saying so (:func:`available` tells).
"""

import atexit
import sys
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

from . import _native
from ._native import Carrier, Tensor

__all__ = [
    "Cluster",
    "Communicator",
    "all_reduce",
    "available",
    "average_gradients",
    "cluster_local",
    "communicator",
    "init",
    "upload",
]

_MISSING = (
    "this build of strideweave has no MPI support: its extension module was built without "
    "the cargo feature 'mpi' (make develop builds it; or "
    'MATURIN_PEP517_ARGS="--features mpi" pip install . with Open MPI installed)'
)


def available() -> bool:
    """Whether the extension module was built with MPI support."""
    return hasattr(_native, "mpi_init")


def _require() -> None:
    if not available():
        raise NotImplementedError(_MISSING)


class _Unavailable:
    """Stands for the MPI classes in a build without MPI support."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(_MISSING)


if TYPE_CHECKING:
    from ._native import Cluster as Cluster
    from ._native import Communicator as Communicator
else:
    Communicator = getattr(_native, "Communicator", _Unavailable)
    Cluster = getattr(_native, "Cluster", _Unavailable)


_world: Optional[Communicator] = None
_converted: Dict[int, Communicator] = {}


def _mpi4py_in_use() -> bool:
    return "mpi4py.MPI" in sys.modules


def init(comm: Any = None) -> Communicator:
    """Starts MPI for StrideWeave (once per process) and returns a communicator: ``comm``'s
    ranks when an ``mpi4py`` communicator is given, otherwise every rank (the world).

    MPI is adopted when ``mpi4py`` is in use (it needs ``MPI_THREAD_SERIALIZED`` or more;
    ``mpi4py``'s default is ``MPI_THREAD_MULTIPLE``), and initialized here otherwise (then
    finalized at interpreter exit). Collective: every rank calls it.
    """
    global _world
    _require()
    if _world is None:
        adopt = comm is not None or _mpi4py_in_use()
        _world = _native.mpi_init(adopt)
        if not adopt:
            atexit.register(_native.mpi_finalize)
    if comm is None:
        return _world
    return communicator(comm)


def communicator(comm: Any) -> Communicator:
    """``comm`` as a StrideWeave communicator: a :class:`Communicator` as it is, an
    ``mpi4py`` communicator (anything with ``py2f()``) converted once and duplicated
    (collective over its ranks the first time)."""
    _require()
    if isinstance(comm, Communicator):
        return comm
    py2f = getattr(comm, "py2f", None)
    if py2f is None:
        raise TypeError(
            f"comm must be a strideweave.mpi.Communicator or an mpi4py communicator, "
            f"got {type(comm).__name__}"
        )
    if _world is None:
        init()
    handle = int(py2f())
    known = _converted.get(handle)
    if known is None:
        known = _native.mpi_communicator_from_fortran(handle)
        _converted[handle] = known
    return known


def _resolve(comm: Any) -> Communicator:
    return init() if comm is None else communicator(comm)


def all_reduce(tensor: Tensor, reduction: str = "sum", comm: Any = None) -> Tensor:
    """The element-wise sum or mean (``reduction``: ``"sum"`` or ``"mean"``) of ``tensor``
    over the ranks of ``comm`` (the world by default): a new tensor on the CPU, differentiable
    (its backward pass all-reduces the cotangents). Every rank calls it with the same shape
    and dtype; a rank that exited makes the others fail within the communicator's timeout."""
    return _native.mpi_all_reduce(tensor, reduction, _resolve(comm))


def average_gradients(parameters: Sequence[Tensor], comm: Any = None) -> None:
    """After ``backward``: replaces each parameter's ``grad`` by its mean over the ranks of
    ``comm`` (the world by default), every parameter in one collective. Parameters without
    a gradient are skipped; the lists must agree across ranks."""
    _native.mpi_average_gradients(list(parameters), _resolve(comm))


def cluster_local(values: Optional[Sequence[float]] = None, *, size: int = 0) -> Carrier:
    """A ``ClusterLocal`` carrier (Float32 host memory of this rank that computes with the
    CPU's kernels, the primary tier paired with cluster memory): holding ``values``, or
    ``size`` zeroed slots when ``values`` is None."""
    _require()
    if values is None:
        return _native.mpi_cluster_local(None, size)
    return _native.mpi_cluster_local([float(v) for v in values], 0)


def upload(tensor: Tensor) -> Tensor:
    """A compact ``ClusterLocal`` copy of ``tensor`` (its values in its own order, its
    shape): how dense operands join a computation on the cluster tier."""
    _require()
    return _native.mpi_cluster_local_upload(tensor)
