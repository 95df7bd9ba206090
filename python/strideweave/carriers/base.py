"""The carrier base class and the closed-class rule: the original's ``strideweave.carriers.base``.

``Carrier`` is open: a carrier class of one's own subclasses it (definition-free, or with a
registered ``CarrierDefinition``). The shipped concrete classes are closed: each states its
storage, capabilities and factories for its exact class, so a subclass would inherit claims it
cannot keep; subclassing one is a ``TypeError`` with the one message below.
"""

from typing import NoReturn

from .._native import CLOSED_CARRIER_MESSAGE as CLOSED_CARRIER_MESSAGE
from .._native import Carrier as Carrier

__all__ = ["CLOSED_CARRIER_MESSAGE", "Carrier", "reject_carrier_subclass"]


def reject_carrier_subclass(name: str) -> NoReturn:
    """Raises the ``TypeError`` a closed carrier class named ``name`` refuses a subclass with."""
    raise TypeError(CLOSED_CARRIER_MESSAGE.format(name=name))
