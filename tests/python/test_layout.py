"""Layout: CuTe notation both ways, evaluation and the algebra."""

import itertools

import pytest

import strideweave as sw


def test_notation_round_trips() -> None:
    for text in ["(4,(2,3)):(1,(4,8))", "8:1", "(2,3):(3,1)", "((2,2),(2,3)):((4,1),(2,8))"]:
        layout = sw.Layout(text)
        assert str(layout) == text
        assert sw.Layout(str(layout)) == layout
        assert repr(layout) == f"Layout('{text}')"


def test_trees_build_the_same_layout_as_the_notation() -> None:
    assert sw.Layout((4, (2, 3)), (1, (4, 8))) == sw.Layout("(4,(2,3)):(1,(4,8))")
    assert sw.Layout([2, 3]) == sw.Layout("(2,3):(1,2)")  # column-major by default
    layout = sw.Layout("(4,(2,3)):(1,(4,8))")
    assert layout.shape == (4, (2, 3))
    assert layout.stride == (1, (4, 8))
    assert hash(layout) == hash(sw.Layout((4, (2, 3)), (1, (4, 8))))


def test_queries_and_evaluation() -> None:
    layout = sw.Layout("(4,(2,3)):(1,(4,8))")
    assert (layout.size, layout.cosize, layout.rank, layout.depth, len(layout)) == (24, 24, 2, 2, 2)
    assert layout((3, (1, 2))) == 23
    assert layout((3, 5)) == 23  # an int stands for the subtree's ordinal
    assert layout.index((3, 5)) == 23
    assert layout[1] == sw.Layout("(2,3):(4,8)")
    assert layout.is_injective
    # Brute force: index == sum of coordinate * stride over the leaves.
    for i, j, k in itertools.product(range(4), range(2), range(3)):
        assert layout((i, (j, k))) == i + 4 * j + 8 * k


def test_algebra_matches_cute() -> None:
    divided = sw.Layout("(4,2,3):(2,1,8)").divide(sw.Layout("4:2"))
    assert str(divided) == "((2,2),(2,3)):((4,1),(2,8))"
    assert str(sw.Layout("(2,2):(1,6)").complement(24)) == "(3,2):(2,12)"
    assert str(sw.Layout("(2,4):(1,2)").coalesce()) == "8:1"
    assert sw.Layout("(2,3):(1,2)") + sw.Layout("4:6") == sw.Layout("(2,3,4):(1,2,6)")
    assert sw.Layout("(2,3):(1,2)").permute(1, 0) == sw.Layout("(3,2):(2,1)")


def test_composition_is_a_layout_when_exact_else_a_map() -> None:
    exact = sw.Layout("8:2").compose(sw.Layout("4:1"))
    assert isinstance(exact, sw.Layout)
    assert str(exact) == "4:2"
    general = sw.Layout("(2,2):(1,3)").compose(sw.Layout("4:1"))
    assert isinstance(general, sw.Composition)
    assert [general(i) for i in range(4)] == [0, 1, 3, 4]
    assert general.size == 4 and general.codomain_size == 5


def test_inverses_satisfy_their_laws() -> None:
    layout = sw.Layout("(2,3):(3,1)")
    right = layout.right_inverse()
    for i in range(right.size):
        assert layout(right(i)) == i
    left = layout.left_inverse()
    for i in range(layout.size):
        assert left(layout(i)) == i


def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="^Shape extents must be >= 1, got 0$"):
        sw.Layout((2, 0))
    with pytest.raises(ValueError, match="overlaps with itself"):
        sw.Layout("(2,2):(1,1)").complement(4)
    with pytest.raises(TypeError, match="Layout shape must be an int or a tuple of them, got bool"):
        sw.Layout(True)
    with pytest.raises(TypeError, match="takes no stride"):
        sw.Layout("4:1", 1)
    with pytest.raises(ValueError):
        sw.Layout("(4:1")
    with pytest.raises(ValueError, match="out of range"):
        sw.Layout("4:1")(4)
