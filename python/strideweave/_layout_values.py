"""The original package's hierarchical value types: ``Node``, ``Tree``, ``Shape`` and ``Stride``.

They are plain immutable Python values. The native ``Layout`` takes integer trees (or CuTe
notation) rather than ``Shape`` and ``Stride`` objects; ``Shape.top_level`` and
``Stride.top_level`` are such trees (nested tuples of ints), so
``Layout(shape.top_level, stride.top_level)`` builds the matching layout.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Iterable, Iterator, List, Tuple, Union

__all__ = ["Node", "Shape", "Stride", "Tree"]


class _NodeLeaf:
    """A leaf marker that names the source mode it stands for (``Node.id(k)``)."""

    __slots__ = ("id",)
    id: int

    def __init__(self, id: int) -> None:
        if not isinstance(id, int):
            raise TypeError(f"Node leaf id must be an integer, got {type(id).__name__}")
        if id < 0:
            raise ValueError(f"Node leaf id must be non-negative, got {id}")
        object.__setattr__(self, "id", id)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Node.id markers are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Node.id markers are immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _NodeLeaf):
            return NotImplemented
        return self.id == other.id

    def __hash__(self) -> int:
        return hash((_NodeLeaf, self.id))

    def __repr__(self) -> str:
        return f"Node.id({self.id})"

    def __reduce__(self) -> Tuple[Any, Tuple[int]]:
        return (_NodeLeaf, (self.id,))


class Node(Enum):
    """The markers of a tree recipe: a leaf, the start of a nested mode, its end.

    ``Node.id(k)`` is a leaf that also names source mode ``k`` (used by output trees that
    say where each mode comes from).
    """

    Leaf = 1
    Push = 2
    Pop = 3

    @staticmethod
    def id(id_: int) -> _NodeLeaf:
        """A leaf marker naming source mode ``id_`` (a non-negative int)."""
        return _NodeLeaf(id_)


TreeItem = Union[int, Node, _NodeLeaf, "Tree"]


def _is_leaf_marker(value: object) -> bool:
    return value is Node.Leaf or isinstance(value, _NodeLeaf)


class Tree(Tuple[Any, ...]):
    """An immutable tree of leaf markers: a tuple whose items are leaves or subtrees.

    ``Tree(1, Tree(1, 1))`` has three leaves; an int item stands for ``Node.Leaf``, and
    ``Node.id(k)`` leaves keep their id. ``size`` counts the leaves and ``depth`` the levels.
    """

    __slots__ = ()

    def __new__(cls, *items: TreeItem) -> Tree:
        normalized, _depth, _size = Tree.norm(items)
        return super().__new__(cls, normalized)

    def __getnewargs__(self) -> Tuple[Any, ...]:
        return tuple(self)

    @property
    def size(self) -> int:
        """The number of leaves."""
        return sum(item.size if isinstance(item, Tree) else 1 for item in self)

    @property
    def depth(self) -> int:
        """The number of levels: 1 for a flat tree."""
        return 1 + max((item.depth for item in self if isinstance(item, Tree)), default=0)

    @staticmethod
    def norm(level: Iterable[TreeItem]) -> Tuple[List[Any], int, int]:
        """``(items, depth, size)`` of one level: ints become ``Node.Leaf``."""
        items: List[Any] = []
        depth = 0
        size = 0
        for item in level:
            if isinstance(item, Tree):
                items.append(item)
                depth = max(depth, item.depth)
                size += item.size
            elif isinstance(item, int) and not isinstance(item, Enum):
                items.append(Node.Leaf)
                size += 1
            elif _is_leaf_marker(item):
                items.append(item)
                size += 1
            else:
                raise ValueError(
                    "Tree can only accept integers or Node.Leaf (or Node.id) leaf markers, "
                    f"and Tree objects for subtrees; got {item!r}"
                )
        return items, depth + 1, size

    @staticmethod
    def get_recipe(tree: Tree) -> List[Node]:
        """The tree as a flat recipe: ``Leaf`` per leaf, ``Push`` ... ``Pop`` around a subtree."""
        recipe: List[Node] = []
        for item in tree:
            if isinstance(item, Tree):
                recipe.append(Node.Push)
                recipe.extend(Tree.get_recipe(item))
                recipe.append(Node.Pop)
            else:
                recipe.append(Node.Leaf)
        return recipe

    @property
    def recipe(self) -> List[Node]:
        """This tree's recipe (a fresh list)."""
        return Tree.get_recipe(self)

    @staticmethod
    def bake(values: Iterable[Any], recipe: Iterable[Node]) -> List[Any]:
        """Nests ``values`` as ``recipe`` says: one value per ``Leaf``, a list per subtree."""
        stack: List[List[Any]] = [[]]
        source = iter(values)
        for step in recipe:
            if step is Node.Leaf:
                try:
                    stack[-1].append(next(source))
                except StopIteration:
                    raise ValueError(
                        "Iterable object to bake does not match recipe length: it ran out of values"
                    ) from None
            elif step is Node.Push:
                stack.append([])
            elif step is Node.Pop:
                inner = stack.pop()
                stack[-1].append(inner)
        return stack[0]

    @staticmethod
    def bake_tree(recipe: Iterable[Node]) -> Tree:
        """The tree a recipe describes."""
        stack: List[List[Any]] = [[]]
        for step in recipe:
            if step is Node.Leaf:
                stack[-1].append(Node.Leaf)
            elif step is Node.Push:
                stack.append([])
            elif step is Node.Pop:
                inner = stack.pop()
                stack[-1].append(Tree(*inner))
        return Tree(*stack[0])

    def reshape(self, values: Iterable[Any]) -> List[Any]:
        """``values`` nested like this tree: ``Tree(1, Tree(1, 1)).reshape("ABC")`` is
        ``["A", ["B", "C"]]``."""
        return Tree.bake(values, self.recipe)


def _is_sized_iterable(value: object) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    try:
        iter(value)  # type: ignore[call-overload]
        len(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


class _ShapeLevel(Tuple[Any, ...]):
    """One level of a Shape: a tuple of extents (ints) and nested levels."""

    __slots__ = ()

    @property
    def logical_size(self) -> int:
        """The product of every extent below this level."""
        size = 1
        for item in self:
            size *= item.logical_size if isinstance(item, _ShapeLevel) else item
        return size

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Shape levels are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Shape levels are immutable")


class _StrideLevel(Tuple[Any, ...]):
    """One level of a Stride: a tuple of strides (ints) and nested levels."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Stride levels are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Stride levels are immutable")


def _items_of(items: Tuple[Any, ...]) -> Any:
    """The top level the constructor arguments stand for (the original's rule)."""
    if len(items) == 0:
        return ()
    if len(items) > 1:
        return items
    only = items[0]
    if isinstance(only, int):
        return [only]
    return only


def _top_level_items(kind: str, value: Any) -> Any:
    if not _is_sized_iterable(value):
        raise TypeError(
            f"{kind} takes ints and sized iterables of them, got {type(value).__name__}"
        )
    return value


def _plain(level: Tuple[Any, ...]) -> Tuple[Any, ...]:
    return tuple(_plain(item) if isinstance(item, tuple) else item for item in level)


class Shape:
    """A hierarchical shape: positive extents, nested in modes.

    ``Shape(2, [3, 4])`` (several arguments are the top-level modes), ``Shape([2, [3, 4]])``
    (one argument is the iterable of modes) and ``Shape(3)`` (one int is one mode). Extents
    are ints >= 1. Shapes are immutable, compare by value and evaluate first mode fastest
    (``decode`` / ``encode``).
    """

    __slots__ = ("top_level", "depth", "logical_size")
    top_level: _ShapeLevel
    depth: int
    logical_size: int

    def __init__(self, *items: Any) -> None:
        level, depth = Shape.normalize_input(_top_level_items("Shape", _items_of(items)), 0)
        object.__setattr__(self, "top_level", level)
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "logical_size", level.logical_size)

    @staticmethod
    def normalize_input(items: Any, depth: int) -> Tuple[_ShapeLevel, int]:
        """``(level, depth)`` of the iterable ``items``: extents checked, subtrees nested."""
        level: List[Any] = []
        deepest = 0
        for item in items:
            if isinstance(item, Shape) and item.is_int and len(item) == 1:
                item = int(item)
            if isinstance(item, int):
                if item < 1:
                    raise ValueError(f"Dimension shape must not be less than 1, got {item}")
                level.append(int(item))
            elif _is_sized_iterable(item):
                inner, inner_depth = Shape.normalize_input(item, depth)
                level.append(inner)
                deepest = max(deepest, inner_depth - depth)
            else:
                raise ValueError(
                    "Shape contains an element that is not an integer or a iterable: "
                    f"{item!r}"
                )
        return _ShapeLevel(level), depth + 1 + deepest

    def __getitem__(self, key: Union[int, slice]) -> Shape:
        return Shape(self.top_level[key])

    def __iter__(self) -> Iterator[Shape]:
        return (Shape([x]) if isinstance(x, int) else Shape(x) for x in self.top_level)

    def __len__(self) -> int:
        return len(self.top_level)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Shape):
            return NotImplemented
        return _plain(self.top_level) == _plain(other.top_level)

    def __hash__(self) -> int:
        return hash(("Shape", _plain(self.top_level)))

    @property
    def is_int(self) -> bool:
        """Whether this shape is at most one flat extent (``int(shape)`` works)."""
        return len(self) <= 1 and self.depth <= 1

    def __int__(self) -> int:
        if not self.is_int or len(self) == 0:
            raise ValueError(f"Shape can not be represented as a integer: {self!r}")
        value: int = self.top_level[0]
        return value

    @property
    def size(self) -> int:
        """The number of coordinates: the product of every extent."""
        return self.logical_size

    def decode(self, index: int) -> Tuple[Any, ...]:
        """The hierarchical coordinate of ordinal ``index`` (first mode fastest):
        ``Shape(5, [20, 4]).decode(214) == (4, (2, 2))``."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"Shape index must be an integer, got {type(index).__name__}")
        if index < 0 or index >= self.size:
            raise ValueError(f"Index is not in domain of shape: {index} for {self!r}")
        return _decode(self.top_level, index)

    def encode(self, coordinate: Any) -> int:
        """The ordinal of a hierarchical coordinate; an int may stand for any subtree:
        ``Shape(5, [20, 4]).encode((4, (2, 2))) == Shape(5, [20, 4]).encode((4, 42)) == 214``."""
        return _encode(self.top_level, coordinate)

    @staticmethod
    def concat(first: Shape, second: Shape) -> Shape:
        """The top-level modes of ``first`` followed by those of ``second``."""
        return Shape([*first.top_level, *second.top_level])

    @staticmethod
    def append(first: Shape, second: Shape) -> Shape:
        """``first``'s modes and then ``second`` as one more mode (an int shape is one extent)."""
        if second.is_int:
            return Shape.concat(first, second)
        return Shape([*first.top_level, second.top_level])

    @staticmethod
    def is_iterable(value: object) -> bool:
        """Whether ``value`` is iterable and sized (strings are not)."""
        return _is_sized_iterable(value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Shape is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Shape is immutable")

    def __reduce__(self) -> Tuple[Any, Tuple[Any]]:
        return (Shape, (_plain(self.top_level),))

    def __repr__(self) -> str:
        return f"Shape<{_plain(self.top_level)!r}>"

    def __str__(self) -> str:
        return f"Shape<{_plain(self.top_level)}>"


def _decode(level: _ShapeLevel, index: int) -> Tuple[Any, ...]:
    coordinate: List[Any] = []
    for item in level:
        extent = item.logical_size if isinstance(item, _ShapeLevel) else item
        part = index % extent
        index //= extent
        coordinate.append(_decode(item, part) if isinstance(item, _ShapeLevel) else part)
    return tuple(coordinate)


def _encode(level: _ShapeLevel, coordinate: Any) -> int:
    if isinstance(coordinate, int) and not isinstance(coordinate, bool):
        if coordinate < 0 or coordinate >= level.logical_size:
            raise ValueError(
                f"Coordinate is not in domain of shape: {coordinate} for extent "
                f"{level.logical_size}"
            )
        return coordinate
    if not isinstance(coordinate, (tuple, list)):
        raise TypeError(
            f"Coordinate must be an integer, tuple, or list, got {type(coordinate).__name__}"
        )
    if len(coordinate) != len(level):
        raise ValueError(
            f"Coordinate does not match shape hierarchy: {len(coordinate)} entries for "
            f"{len(level)} modes"
        )
    ordinal = 0
    scale = 1
    for item, part in zip(level, coordinate):
        if isinstance(item, _ShapeLevel):
            ordinal += scale * _encode(item, part)
            scale *= item.logical_size
            continue
        if isinstance(part, (tuple, list)):
            raise ValueError("Coordinate does not match shape hierarchy: a tuple for a leaf")
        if isinstance(part, bool) or not isinstance(part, int):
            raise TypeError("Coordinate must contain only integers, tuples, or lists")
        if part < 0 or part >= item:
            raise ValueError(f"Coordinate is not in domain of shape: {part} for extent {item}")
        ordinal += scale * part
        scale *= item
    return ordinal


class Stride:
    """A hierarchical stride profile: non-negative strides, nested like a Shape.

    Built by the same rules as ``Shape`` (``Stride(1, [2, 6])``, ``Stride([1, 2])``,
    ``Stride(1)``); immutable and compared by value.
    """

    __slots__ = ("top_level", "depth")
    top_level: _StrideLevel
    depth: int

    def __init__(self, *items: Any) -> None:
        level, depth = Stride.normalize_input(_top_level_items("Stride", _items_of(items)))
        object.__setattr__(self, "top_level", level)
        object.__setattr__(self, "depth", depth)

    @staticmethod
    def normalize_input(items: Any) -> Tuple[_StrideLevel, int]:
        """``(level, depth)`` of the iterable ``items``: strides checked, subtrees nested."""
        level: List[Any] = []
        deepest = 0
        for item in items:
            if isinstance(item, Stride) and item.is_int and len(item) == 1:
                item = int(item)
            if isinstance(item, int):
                if item < 0:
                    raise ValueError(f"Stride value must not be negative, got {item}")
                level.append(int(item))
            elif _is_sized_iterable(item):
                inner, inner_depth = Stride.normalize_input(item)
                level.append(inner)
                deepest = max(deepest, inner_depth)
            else:
                raise ValueError(
                    "Stride contains an element that is not an integer or a iterable: "
                    f"{item!r}"
                )
        return _StrideLevel(level), deepest + 1

    def __getitem__(self, key: Union[int, slice]) -> Stride:
        return Stride(self.top_level[key])

    def __iter__(self) -> Iterator[Stride]:
        return (Stride([x]) if isinstance(x, int) else Stride(x) for x in self.top_level)

    def __len__(self) -> int:
        return len(self.top_level)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stride):
            return NotImplemented
        return _plain(self.top_level) == _plain(other.top_level)

    def __hash__(self) -> int:
        return hash(("Stride", _plain(self.top_level)))

    @property
    def is_int(self) -> bool:
        """Whether this stride is at most one flat value (``int(stride)`` works)."""
        return len(self) <= 1 and self.depth <= 1

    def __int__(self) -> int:
        if not self.is_int or len(self) == 0:
            raise ValueError(f"Stride can not be represented as a integer: {self!r}")
        value: int = self.top_level[0]
        return value

    @staticmethod
    def concat(first: Stride, second: Stride) -> Stride:
        """The top-level modes of ``first`` followed by those of ``second``."""
        return Stride([*first.top_level, *second.top_level])

    @staticmethod
    def append(first: Stride, second: Stride) -> Stride:
        """``first``'s modes and then ``second`` as one more mode (an int stride is one value)."""
        if second.is_int:
            return Stride.concat(first, second)
        return Stride([*first.top_level, second.top_level])

    @staticmethod
    def is_iterable(value: object) -> bool:
        """Whether ``value`` is iterable and sized (strings are not)."""
        return _is_sized_iterable(value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Stride is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Stride is immutable")

    def __reduce__(self) -> Tuple[Any, Tuple[Any]]:
        return (Stride, (_plain(self.top_level),))

    def __repr__(self) -> str:
        return f"Stride<{_plain(self.top_level)!r}>"

    def __str__(self) -> str:
        return f"Stride<{_plain(self.top_level)}>"
