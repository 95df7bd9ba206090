"""The original package's index maps written in Python: the ``IndexMap`` contract and the
``Permutation``, ``Product`` and ``Swizzle`` maps.

An index map sends every coordinate of a hierarchical ``Shape`` (its domain) to an int in
``[0, codomain_size)``. These maps evaluate and compose among themselves; the native
``Layout`` is not an ``IndexMap`` subclass (see docs/python.md, "Module layout").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ._layout_values import Shape

__all__ = ["IndexMap", "Permutation", "Product", "Swizzle", "SwizzleStage"]


class IndexMap(ABC):
    """An immutable map from a hierarchical ``Shape`` to ints below ``codomain_size``.

    Subclasses call ``super().__init__(shape, codomain_size, is_injective)`` and implement
    ``_index_ordinal(ordinal)`` (the value at one domain ordinal) and ``_compose(inner)``.
    ``is_injective`` is ``True`` (proven), ``False`` (a collision is known) or ``None``.
    """

    _shape: Shape
    _codomain_size: int
    _is_injective: Optional[bool]

    def __init__(self, shape: Shape, codomain_size: int, is_injective: Optional[bool]) -> None:
        if not isinstance(shape, Shape):
            raise TypeError(f"shape must be a Shape, got {type(shape).__name__}")
        if isinstance(codomain_size, bool) or not isinstance(codomain_size, int):
            raise TypeError(
                f"codomain_size must be an integer, got {type(codomain_size).__name__}"
            )
        if codomain_size <= 0:
            raise ValueError(f"codomain_size must be positive, got {codomain_size}")
        if is_injective is not None and not isinstance(is_injective, bool):
            raise TypeError("is_injective must be True, False, or None")
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "_codomain_size", codomain_size)
        object.__setattr__(self, "_is_injective", is_injective)

    @property
    def shape(self) -> Shape:
        """The domain."""
        return self._shape

    @property
    def size(self) -> int:
        """The number of domain coordinates."""
        return self._shape.size

    @property
    def codomain_size(self) -> int:
        """One past the largest value the map may return."""
        return self._codomain_size

    @property
    def is_injective(self) -> Optional[bool]:
        """``True`` when proven injective, ``False`` when not, ``None`` when unknown."""
        return self._is_injective

    @abstractmethod
    def _index_ordinal(self, index: int) -> int:
        """The value at domain ordinal ``index`` (already checked to be in the domain)."""

    @abstractmethod
    def _compose(self, inner: IndexMap) -> IndexMap:
        """This map after ``inner``, for an ``inner`` whose codomain fits this domain."""

    def _encode_key(self, key: Any) -> int:
        return self._shape.encode(key)

    def _composition_injectivity(self) -> Optional[bool]:
        return self._is_injective

    def _composition_is_identity(self) -> bool:
        return False

    def index(self, key: Any) -> int:
        """The value at ``key``: an int ordinal or a hierarchical coordinate."""
        value = self._index_ordinal(self._encode_key(key))
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"IndexMap evaluation must return an integer, got {type(value).__name__}"
            )
        if value < 0 or value >= self._codomain_size:
            raise ValueError(
                f"IndexMap result is outside its declared codomain: {value} not in "
                f"[0, {self._codomain_size})"
            )
        return value

    def __call__(self, key: Any) -> int:
        return self.index(key)

    def compose(self, inner: IndexMap) -> IndexMap:
        """The map ``key -> self(inner(key))``: ``inner`` runs first."""
        if not isinstance(inner, IndexMap):
            raise TypeError(f"inner must be an IndexMap, got {type(inner).__name__}")
        if inner.codomain_size > self.size:
            raise ValueError(
                f"inner codomain exceeds the outer map domain: {inner.codomain_size} > "
                f"{self.size}"
            )
        if inner._composition_is_identity() and inner.shape == self.shape:
            return self
        if self._composition_is_identity() and inner.codomain_size == self.codomain_size:
            return inner
        result = self._compose(inner)
        if not isinstance(result, IndexMap):
            raise TypeError(
                f"IndexMap composition must return an IndexMap, got {type(result).__name__}"
            )
        return result

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("IndexMap is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("IndexMap is immutable")


class _ComposedIndexMap(IndexMap):
    """A chain of maps applied innermost first (what a generic composition gives)."""

    _maps: Tuple[IndexMap, ...]

    def __init__(self, maps: Tuple[IndexMap, ...]) -> None:
        if len(maps) < 2:
            raise ValueError("a composed index map chains at least two maps")
        if maps[0]._composition_injectivity() is False:
            injective: Optional[bool] = False
        elif all(m._composition_injectivity() is True for m in maps):
            injective = True
        else:
            injective = None
        super().__init__(maps[0].shape, maps[-1].codomain_size, injective)
        object.__setattr__(self, "_maps", maps)

    def _index_ordinal(self, index: int) -> int:
        value = index
        for m in self._maps:
            value = m.index(value)
        return value

    def _compose(self, inner: IndexMap) -> IndexMap:
        return _chain(self, inner)


def _chain(outer: IndexMap, inner: IndexMap) -> IndexMap:
    """``outer`` after ``inner`` as one flat chain, identities that change nothing left out."""
    maps: List[IndexMap] = []
    for m in (inner, outer):
        maps.extend(m._maps if isinstance(m, _ComposedIndexMap) else (m,))
    domain = maps[0].shape
    codomain = maps[-1].codomain_size
    position = 0
    while len(maps) > 1 and position < len(maps):
        m = maps[position]
        keeps_domain = position != 0 or maps[1].shape == domain
        keeps_codomain = position != len(maps) - 1 or maps[-2].codomain_size == codomain
        if m._composition_is_identity() and keeps_domain and keeps_codomain:
            del maps[position]
            position = max(0, position - 1)
        else:
            position += 1
    if len(maps) == 1:
        return maps[0]
    return _ComposedIndexMap(tuple(maps))


class Permutation(IndexMap):
    """An explicit table: ordinal ``i`` of a one-mode domain maps to ``values[i]``.

    The values are distinct ints in ``[0, codomain_size)``, so the map is injective.
    """

    _values: Tuple[int, ...]

    def __init__(self, values: Sequence[int], codomain_size: int) -> None:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise TypeError(
                f"values must be a sequence of integers, got {type(values).__name__}"
            )
        table = tuple(values)
        if not table:
            raise ValueError("values must contain at least one entry")
        if any(isinstance(v, bool) or not isinstance(v, int) for v in table):
            raise TypeError("values must contain only integers")
        if isinstance(codomain_size, bool):
            raise TypeError("codomain_size must be an integer, got bool")
        super().__init__(Shape(len(table)), codomain_size, True)
        if any(v < 0 for v in table):
            raise ValueError("values must be non-negative")
        if any(v >= codomain_size for v in table):
            raise ValueError(f"values must be smaller than codomain_size ({codomain_size})")
        if len(set(table)) != len(table):
            raise ValueError("values must be pairwise distinct")
        object.__setattr__(self, "_values", table)

    @property
    def values(self) -> Tuple[int, ...]:
        """The table."""
        return self._values

    def _index_ordinal(self, index: int) -> int:
        return self._values[index]

    def _compose(self, inner: IndexMap) -> IndexMap:
        return _chain(self, inner)


class Product(IndexMap):
    """The Cartesian product of two or more maps: mode ``k`` of the domain is child ``k``'s
    domain, and the result is the children's values encoded in ``target_shape`` (one mode
    per child, first mode fastest)."""

    _children: Tuple[IndexMap, ...]
    _target_shape: Shape

    def __init__(self, *children: IndexMap) -> None:
        if len(children) < 2:
            raise ValueError(f"Product requires at least two children, got {len(children)}")
        if any(not isinstance(child, IndexMap) for child in children):
            raise TypeError("Product children must be IndexMap values")
        modes: List[Any] = []
        targets: List[Any] = []
        for child in children:
            domain = child.shape
            modes.append(int(domain) if len(domain) == 1 and domain.is_int else domain.top_level)
            target = child.target_shape if isinstance(child, Product) else child.codomain_size
            targets.append(target)
        domain_shape = Shape(modes)
        target_shape = Shape(targets)
        if any(child.is_injective is False for child in children):
            injective: Optional[bool] = False
        elif all(child.is_injective is True for child in children):
            injective = True
        else:
            injective = None
        super().__init__(domain_shape, target_shape.size, injective)
        object.__setattr__(self, "_children", tuple(children))
        object.__setattr__(self, "_target_shape", target_shape)

    @property
    def children(self) -> Tuple[IndexMap, ...]:
        """The factors, in mode order."""
        return self._children

    @property
    def target_shape(self) -> Shape:
        """The codomain as a shape: one mode per child (a Product child's own target shape)."""
        return self._target_shape

    def _index_ordinal(self, index: int) -> int:
        coordinate = self.shape.decode(index)
        values = tuple(child(part) for child, part in zip(self._children, coordinate))
        return self._target_shape.encode(values)

    def _compose(self, inner: IndexMap) -> IndexMap:
        return _chain(self, inner)


@dataclass(frozen=True)
class SwizzleStage:
    """One XOR step over two bit fields of ``bits`` bits: the lower field starts at bit
    ``base``, the upper at ``base + |shift|``. A positive ``shift`` XORs the upper field into
    the lower one, a negative one the lower into the upper; a stage undoes itself."""

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        for name in ("bits", "base", "shift"):
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
        if self.bits <= 0:
            raise ValueError(f"bits must be positive, got {self.bits}")
        if self.base < 0:
            raise ValueError(f"base must be non-negative, got {self.base}")
        if self.shift == 0:
            raise ValueError("shift must be non-zero")
        if abs(self.shift) < self.bits:
            raise ValueError(
                f"swizzle stage fields must not overlap: |shift| {abs(self.shift)} < bits "
                f"{self.bits}"
            )


def _cancel_pairs(stages: Tuple[SwizzleStage, ...]) -> Tuple[SwizzleStage, ...]:
    """The stages with every adjacent repeated pair removed (a stage undoes itself)."""
    kept: List[SwizzleStage] = []
    for stage in stages:
        if kept and kept[-1] == stage:
            kept.pop()
        else:
            kept.append(stage)
    return tuple(kept)


class Swizzle(IndexMap):
    """XOR stages applied in order over a power-of-two domain; a bijection of
    ``[0, shape.size)``."""

    _stages: Tuple[SwizzleStage, ...]

    def __init__(self, shape: Shape, *stages: SwizzleStage) -> None:
        if not isinstance(shape, Shape):
            raise TypeError(f"shape must be a Shape, got {type(shape).__name__}")
        if any(not isinstance(stage, SwizzleStage) for stage in stages):
            raise TypeError("every stage must be a SwizzleStage")
        size = shape.size
        if size & (size - 1):
            raise ValueError(f"Swizzle domain size must be a power of two, got {size}")
        width = (size - 1).bit_length()
        for stage in stages:
            if stage.base + abs(stage.shift) + stage.bits > width:
                raise ValueError(
                    f"swizzle stage fields exceed the domain bit width ({width} bits): {stage!r}"
                )
        super().__init__(shape, size, True)
        object.__setattr__(self, "_stages", tuple(stages))

    @property
    def stages(self) -> Tuple[SwizzleStage, ...]:
        """The stages, in evaluation order."""
        return self._stages

    def _index_ordinal(self, index: int) -> int:
        value = index
        for stage in self._stages:
            mask = (1 << stage.bits) - 1
            if stage.shift > 0:
                value ^= ((value >> (stage.base + stage.shift)) & mask) << stage.base
            else:
                value ^= ((value >> stage.base) & mask) << (stage.base - stage.shift)
        return value

    def _compose(self, inner: IndexMap) -> IndexMap:
        if isinstance(inner, Swizzle) and inner.size == self.size:
            return Swizzle(inner.shape, *_cancel_pairs(inner.stages + self.stages))
        return _chain(self, inner)

    def _composition_is_identity(self) -> bool:
        return not _cancel_pairs(self._stages)
