"""``KernelExecutionInterface``: the seed's immutable compatibility base of a carrier's
execution context, over the native class ``strideweave._native.KernelExecutionInterface``.

The native class keeps the version and the identity; this subclass refuses attribute changes
at the Python level once a ``KernelProvider`` or ``KernelPack`` holds the interface. Being a
Python-level ``__setattr__``, it leaves ``object.__setattr__`` open to a subclass that sets
its own fields that way in its ``__init__`` (a subclass declaring ``__slots__``, as the
original's kernel interfaces do); the version and the identity stay the native class's, fixed
when the interface is sealed.
"""

from typing import Any

from . import _native


class KernelExecutionInterface(_native.KernelExecutionInterface):
    """``KernelExecutionInterface(version)``: subclass it to add device, stream or workspace
    facilities; its identity is ``(type(interface), interface.version)``, fixed once a
    provider or pack holds it, after which no attribute can be set or deleted."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        self._check_attribute_change(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._check_attribute_change(name)
        object.__delattr__(self, name)


KernelExecutionInterface.__module__ = "strideweave.carriers.extension"
