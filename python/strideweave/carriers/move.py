"""Moving tensors between carriers: the original's ``strideweave.carriers.move``.

``move_async``, its handle ``AwaitMove`` and the move-operation registry (``MoveOperation``,
``ElementwiseMoveOperation``, ``register_move_operation``, ``unregister_move_operation``,
``dispatch_move``) are the native objects; ``registered_move_operation`` is the original's
context manager over the registry, in Python. ``AwaitResult`` is the original's common base
of the framework's completion handles; here it is an abstract class that ``AwaitMove`` and
``AwaitResidency`` are registered with, so ``isinstance(handle, AwaitResult)`` holds for
both. Handles are made by the framework only: ``AwaitResult()`` is a ``TypeError``.

The shipped bulk routes' classes (``CpuToFileBackedMoveOperation``, ...) are the native
classes ``dispatch_move`` returns for those pairs.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from contextlib import contextmanager
from typing import Generic, Iterator, NoReturn, TypeVar

from .._native import AwaitMove as AwaitMove
from .._native import AwaitProjection, AwaitResidency
from .._native import BlockDeviceToCpuMoveOperation as BlockDeviceToCpuMoveOperation
from .._native import CpuToBlockDeviceMoveOperation as CpuToBlockDeviceMoveOperation
from .._native import CpuToFileBackedMoveOperation as CpuToFileBackedMoveOperation
from .._native import FileBackedToCpuMoveOperation as FileBackedToCpuMoveOperation
from .._native import ElementwiseMoveOperation as ElementwiseMoveOperation
from .._native import MoveOperation as MoveOperation
from .._native import MoveOutput as MoveOutput
from .._native import dispatch_move as dispatch_move
from .._native import move_async as move_async
from .._native import register_move_operation as register_move_operation
from .._native import unregister_move_operation as unregister_move_operation

__all__ = [
    "AwaitMove",
    "AwaitResult",
    "BlockDeviceToCpuMoveOperation",
    "CpuToBlockDeviceMoveOperation",
    "CpuToFileBackedMoveOperation",
    "FileBackedToCpuMoveOperation",
    "ElementwiseMoveOperation",
    "MoveOperation",
    "MoveOutput",
    "dispatch_move",
    "move_async",
    "register_move_operation",
    "registered_move_operation",
    "unregister_move_operation",
]

T = TypeVar("T")


class AwaitResult(Generic[T], metaclass=ABCMeta):
    """A framework-made completion handle: ``done`` says whether the work is terminal, and
    ``wait()`` blocks until it is, then returns its result (the same object on every call)
    or raises its exception. It is no coroutine: there is no ``__await__``."""

    __slots__ = ()

    def __new__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "AwaitResult handles are created by the framework (move_async, promote_async, "
            "evict_async), not constructed directly"
        )

    @property
    @abstractmethod
    def done(self) -> bool:
        """Whether the work reached its terminal outcome."""

    @abstractmethod
    def wait(self) -> T:
        """Blocks until the work is terminal; its result, or its exception raised."""


AwaitResult.register(AwaitMove)
AwaitResult.register(AwaitResidency)
AwaitResult.register(AwaitProjection)


@contextmanager
def registered_move_operation(
    source_class: type, destination_class: type, operation_class: type[MoveOperation]
) -> Iterator[type[MoveOperation]]:
    """Registers ``operation_class`` for the exact pair for the ``with`` block, and yields
    it; the pair is unregistered when the block ends, also by an exception."""
    register_move_operation(source_class, destination_class, operation_class)
    try:
        yield operation_class
    finally:
        unregister_move_operation(source_class, destination_class)
