"""The original StrideWeave's static helpers and properties of `Layout` (`leaf`, `get_index`,
`is_leaf`, `infix`, `extract_profile`, `flatten_layout`, `rearrange`, `reverse_rearrange`,
`coalesce_by_mode`, `choose`, `modout`, `make_layout`, `empty`), `permute` with a sequence,
mode slices and `compose` with a `Shape` or a tuple of layouts, over the core's algebra."""

import copy

import pytest

from strideweave import Layout, Node, Shape, Stride, Tree


def lay(shape: object, stride: object) -> Layout:
    return Layout(Shape(shape), Stride(stride))


def test_a_leaf_is_one_mode_and_answers_is_leaf() -> None:
    assert Layout.leaf(6, 3) == Layout("6:3") and Layout.leaf(6, 3).is_leaf
    assert Layout("(4,(2,3)):(1,(4,8))")[0].is_leaf
    assert not Layout("(4,(2,3)):(1,(4,8))")[1].is_leaf
    assert not Layout("(2,3):(1,2)").is_leaf
    assert Layout.empty() == Layout((), ()) and Layout.empty().is_leaf and len(Layout.empty()) == 0
    with pytest.raises(ValueError, match="leaf extent"):
        Layout.leaf(-1, 1)


def test_get_index_is_the_layouts_own_index() -> None:
    nested = lay([3, [2, 5]], [1, [30, 3]])
    assert Layout.get_index(nested, [2, [1, 4]]) == nested.index([2, [1, 4]]) == 2 + 30 + 12
    assert Layout.get_index(nested, 7) == nested(7) == 1 + 3
    with pytest.raises(ValueError, match="get_index layout must be a Layout, got tuple"):
        Layout.get_index((3, 2), 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"coordinate 3 is out of range \[0, 3\) for mode 0"):
        Layout.get_index(nested, [3, [0, 0]])


def test_infix_lists_the_leaves_depth_first() -> None:
    assert lay([7, [2, 3], 4], [1, [9, 18], 0]).infix() == [(7, 1), (2, 9), (3, 18), (4, 0)]
    assert Layout.empty().infix() == []


def test_extract_profile_takes_leaves_or_the_parts_a_profile_names() -> None:
    layout = lay([4, [3, 2]], [2, [8, 24]])
    assert Layout.extract_profile(layout) == [Layout.leaf(4, 2), Layout.leaf(3, 8), Layout.leaf(2, 24)]
    assert Layout.extract_profile(layout, Tree(1, 1)) == [Layout.leaf(4, 2), lay([3, 2], [8, 24])]
    assert Layout.extract_profile(layout, Tree(Node.id(5), Tree(1, Node.Leaf))) == Layout.extract_profile(layout)
    with pytest.raises(ValueError, match=r"layout and tree profile do not match: Layout\('\(4,\(3,2\)\):\(2,\(8,24\)\)'\) has 2 modes where the profile has 3 items"):
        Layout.extract_profile(layout, Tree(1, 1, 1))
    with pytest.raises(TypeError, match="extract_profile profile must be a Tree, got list"):
        Layout.extract_profile(layout, [1, 1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must hold Node.Leaf, Node.id\\(k\\) or int leaves and nested Trees, got str"):
        Layout.extract_profile(layout, ("x", 1))


def test_flatten_layout_gives_the_leaves_and_the_recipe_back() -> None:
    flat, recipe = Layout.flatten_layout(lay([5, [2, [3, 4]]], [1, [5, [10, 30]]]))
    assert flat == lay([5, 2, 3, 4], [1, 5, 10, 30])
    assert recipe == [Node.Leaf, Node.Push, Node.Leaf, Node.Push, Node.Leaf, Node.Leaf, Node.Pop, Node.Pop]
    assert Tree.bake_tree(recipe) == Tree(1, Tree(1, Tree(1, 1)))
    assert all(mode.is_leaf for mode in flat)


def test_rearrange_places_the_selected_parts_by_id() -> None:
    layout = lay([2, [3, 5]], [1, [2, 6]])
    assert Layout.rearrange(layout, Tree(Node.id(2), Node.id(0), Node.id(1))) == lay([5, 2, 3], [6, 1, 2])
    assert Layout.rearrange(layout, Tree(Node.id(1), Node.id(0)), Tree(1, 1)) == lay([[3, 5], 2], [[2, 6], 1])
    assert Layout.rearrange(layout, Tree(Tree(Node.id(0), Node.Leaf), Node.id(1)), Tree(1, 1)) == lay([[2, 1], [3, 5]], [[1, 0], [2, 6]])
    with pytest.raises(ValueError, match="rearrange output places source 0 twice"):
        Layout.rearrange(layout, Tree(Node.id(0), Node.id(0), Node.id(1), Node.id(2)))
    with pytest.raises(ValueError, match="omits source 2 of size 5"):
        Layout.rearrange(layout, Tree(Node.id(0), Node.id(1)))
    with pytest.raises(TypeError, match="rearrange output must be a Tree, got int"):
        Layout.rearrange(layout, 3)  # type: ignore[arg-type]


def test_reverse_rearrange_undoes_a_rearrange() -> None:
    layout = lay([3, 1, [2, 4]], [1, 7, [3, 6]])
    output = Tree(Tree(Node.id(2), Node.Leaf), Node.id(0))
    selection = Tree(1, 1, 1)
    there = Layout.rearrange(layout, output, selection)
    assert there == lay([[[2, 4], 1], 3], [[[3, 6], 0], 1])
    back_output, back_selection = Layout.reverse_rearrange(output, selection)
    assert back_output == Tree(Node.id(2), Node.Leaf, Node.id(0))
    assert back_selection == Tree(Tree(1, 1), 1)
    assert type(back_output) is Tree and type(back_selection) is Tree
    assert Layout.rearrange(there, back_output, back_selection) == lay([3, 1, [2, 4]], [1, 0, [3, 6]])
    with pytest.raises(ValueError, match="reverse_rearrange output names source 3 of only 3 selected"):
        Layout.reverse_rearrange(Tree(Node.id(3)), selection)


def test_coalesce_by_mode_coalesces_each_part_in_place() -> None:
    layout = lay([1, [2, 4], [3, 1]], [1, [1, 2], [8, 0]])
    assert Layout.coalesce_by_mode(layout, Tree(1, 1, 1)) == lay([1, 8, 3], [1, 1, 8])
    assert Layout.coalesce_by_mode(layout, Tree(1, Tree(1, 1), 1)) == lay([1, [2, 4], 3], [1, [1, 2], 8])


def test_choose_and_modout_step_and_cut_leaf_modes() -> None:
    layout = lay([4, 6, 5], [1, 4, 24])
    assert Layout.choose(layout, 8) == lay([1, 3, 5], [8, 8, 24])
    assert Layout.choose(layout, 2) == lay([2, 6, 5], [2, 4, 24])
    assert Layout.modout(lay([1, 3, 5], [8, 8, 24]), 6) == lay([1, 3, 2], [8, 8, 24])
    with pytest.raises(ValueError, match=r"Can not choose the 7-th element of Layout\('\(4,6,5\):\(1,4,24\)'\): its size 120 is not a multiple of 7"):
        Layout.choose(layout, 7)
    with pytest.raises(ValueError, match="6 can not be reduced by 4"):
        Layout.choose(lay([2, 6, 10], [1, 2, 12]), 8)
    with pytest.raises(ValueError, match=r"choose needs every top-level mode of Layout\('\(2,\(3,4\)\):\(1,\(2,6\)\)'\) to be a leaf; mode 1 is \(3,4\):\(2,6\)"):
        Layout.choose(lay([2, [3, 4]], [1, [2, 6]]), 2)
    with pytest.raises(ValueError, match="Shape divisibility condition not met"):
        Layout.modout(lay([4, 6], [1, 4]), 6)


def test_make_layout_appends_each_layout_as_a_mode() -> None:
    assert Layout.make_layout(Layout.leaf(2, 1), lay([3, 4], [2, 6])) == lay([2, [3, 4]], [1, [2, 6]])
    assert Layout.make_layout() == Layout.empty()
    with pytest.raises(ValueError, match="make_layout argument must be a Layout, got int"):
        Layout.make_layout(Layout.leaf(2, 1), 3)  # type: ignore[arg-type]


def test_permute_takes_ints_or_one_sequence() -> None:
    layout = lay([2, [3, 4], 5], [1, [2, 6], 24])
    expected = lay([[3, 4], 5, 2], [[2, 6], 24, 1])
    assert layout.permute(1, 2, 0) == layout.permute((1, 2, 0)) == layout.permute([1, 2, 0]) == expected
    assert Layout.permute(layout, range(3)) == layout
    with pytest.raises(ValueError, match="permute order names mode -1, which is negative"):
        layout.permute(-1, 0, 1)
    with pytest.raises(ValueError, match="repeats mode 0"):
        layout.permute([0, 0, 1])
    with pytest.raises(TypeError, match="permute order entries must be ints, got str"):
        layout.permute(["0", 1, 2])
    with pytest.raises(TypeError, match="permute order entries must be ints, got bool"):
        layout.permute(True, 0, 2)


def test_slices_select_modes_and_iteration_yields_them() -> None:
    layout = lay([2, [3, 4], 5, 6], [1, [2, 6], 24, 120])
    assert layout[1:] == lay([[3, 4], 5, 6], [[2, 6], 24, 120])
    assert layout[::2] == lay([2, 5], [1, 24])
    assert layout[::-1] == lay([6, 5, [3, 4], 2], [120, 24, [2, 6], 1])
    assert layout[4:] == Layout.empty()
    assert list(layout) == [layout[0], layout[1], layout[2], layout[3]]
    assert copy.copy(layout) is layout and copy.deepcopy(layout) is layout


def test_compose_takes_a_shape_or_a_tuple_of_layouts() -> None:
    layout = lay([12, [4, 8]], [59, [13, 1]])
    assert Layout.compose(layout, Shape([3, 8])) == layout.compose((3, 8))
    tiles = (Layout.leaf(3, 4), Layout.leaf(8, 2))
    assert Layout.compose(layout, tiles) == layout.compose(list(tiles)) == lay([3, [2, 4]], [236, [26, 1]])


def test_uniform_preimage_extent_counts_replication() -> None:
    assert lay([4, 3], [0, 1]).uniform_preimage_extent(Shape(3)) == 4
    assert lay([4, 3], [0, 2]).uniform_preimage_extent(Shape(3)) is None
