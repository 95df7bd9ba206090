"""Re-exporting native names the binding is still gaining.

The native module grows the original's definition-free carrier API (``Operation``, the move
registry, class-level capability declarations) while this package's modules already name
where each object lives. ``adopt`` binds each name the native module has into a module's
namespace, as the native object itself, and returns the names it bound (for ``__all__``); a
name the native module lacks stays absent (``tests/python/test_original_layout.py`` lists
those). Once ``_native.pyi`` declares them, plain imports replace these calls.
"""

from typing import Dict, Iterable, List

from . import _native


def adopt(namespace: Dict[str, object], names: Iterable[str]) -> List[str]:
    """Binds every name of ``names`` that ``strideweave._native`` has into ``namespace``."""
    adopted: List[str] = []
    for name in names:
        if hasattr(_native, name):
            namespace[name] = getattr(_native, name)
            adopted.append(name)
    return adopted
