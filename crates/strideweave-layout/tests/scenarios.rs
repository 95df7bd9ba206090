//! The worked examples of docs/layouts.md (items 1–16, as they concern layouts) and the
//! sharper rules of its Decisions, one named test each, with the numbers the page states.

use strideweave_layout::{
    IndexMap, IntTuple, Layout, ProfileToken, Shape, SliceKey, Stride, Tree, TreeNode,
};

fn layout(text: &str) -> Layout {
    text.parse()
        .unwrap_or_else(|e| panic!("test layout {text}: {e}"))
}

fn shape(written: impl Into<IntTuple>) -> Shape {
    Shape::new(written).expect("test shape")
}

/// The message of an expected failure.
fn error<T: std::fmt::Debug>(result: Result<T, strideweave_layout::LayoutError>) -> String {
    result.expect_err("expected a layout error").to_string()
}

#[test]
fn scenario_01_size_and_cosize() {
    let a = layout("(4,2):(2,1)");
    assert_eq!((a.size(), a.cosize()), (8, 8));
    let b = layout("(2,3):(1,4)");
    assert_eq!((b.size(), b.cosize()), (6, 10));
    assert!(b.is_injective());
    let scalar = Layout::scalar();
    assert_eq!((scalar.size(), scalar.cosize(), scalar.rank()), (1, 1, 0));
    assert_eq!(layout("(4,2):(0,0)").cosize(), 1);
}

#[test]
fn scenario_02_hierarchical_index() {
    let a = layout("[2,[3,4]]:[1,[10,100]]");
    assert_eq!(a.index(&(1, (2, 3)).into()).unwrap(), 321);
    assert_eq!(a.index(&(1, 3).into()).unwrap(), 101);
}

#[test]
fn scenario_03_index_by_ordinal_and_bad_keys() {
    let a = layout("(3,4):(2,10)");
    assert_eq!(a.index(&5.into()).unwrap(), 14);
    assert_eq!(a.index_of(5).unwrap(), 14);
    assert_eq!(a.index(&(2, 1).into()).unwrap(), 14);
    assert!(error(a.index(&(3, 0).into())).contains("coordinate 3 is out of range [0, 3)"));
    assert!(error(a.index(&12.into())).contains("coordinate 12 is out of range [0, 12)"));
    assert!(error(a.index(&(-1).into())).contains("coordinate -1"));
    assert!(error(a.index(&IntTuple::from([1]))).contains("has 1 entries but the whole"));
    // A string key (`"a"`, a TypeError in the seed) cannot be written: keys are IntTuple.
}

#[test]
fn scenario_04_injectivity() {
    assert!(!layout("(4,2):(0,1)").is_injective());
    assert!(!layout("(4,2):(1,1)").is_injective());
    assert!(layout("(3,2):(2,3)").is_injective());
    assert!(
        !layout("(4,3):(2,3)").is_injective(),
        "6 is reached as 3·2 and as 2·3"
    );
    assert!(layout("(3,3):(2,3)").is_injective());
}

#[test]
fn scenario_05_broadcast_to_same_tree_only() {
    let a = layout("[2,[1,3]]:[1,[2,2]]");
    let b = a.broadcast_to(&shape((2, (4, 3)))).unwrap();
    assert_eq!(b.to_string(), "(2,(4,3)):(1,(0,2))");
    let flat = layout("(2,1):(1,0)");
    assert!(error(flat.broadcast_to(&shape((2, (4, 3))))).contains("same tree"));
    assert!(error(layout("(2,3):(1,2)").broadcast_to(&shape((2, 4)))).contains("extent 3"));
}

#[test]
fn scenario_06_uniform_preimage_extent() {
    assert_eq!(
        layout("(4,3):(0,1)").uniform_preimage_extent(&shape(3)),
        Some(4)
    );
    assert_eq!(
        layout("(2,2):(1,1)").uniform_preimage_extent(&shape(3)),
        None
    );
    assert_eq!(
        layout("(2,2):(1,2)").uniform_preimage_extent(&shape((2, 2))),
        Some(1)
    );
}

#[test]
fn scenario_07_rearrange() {
    let a = layout("(2,3):(1,2)");
    let output = Tree::new([TreeNode::Id(1), TreeNode::Leaf, TreeNode::Id(0)]);
    assert_eq!(
        a.rearrange(&output, None).unwrap().to_string(),
        "(3,1,2):(2,0,1)"
    );
    let twice = Tree::new([TreeNode::Id(0), TreeNode::Id(0)]);
    assert!(error(a.rearrange(&twice, None)).contains("twice"));
    let omitted = Tree::new([TreeNode::Id(0)]);
    assert!(error(a.rearrange(&omitted, None)).contains("omits source 1 of size 3"));
    let out_of_range = Tree::new([TreeNode::Id(0), TreeNode::Id(2)]);
    assert!(error(a.rearrange(&out_of_range, None)).contains("names source 2"));
    let nested = layout("(2,(3,4)):(1,(2,6))");
    let selection = Tree::new([TreeNode::Leaf, TreeNode::Leaf]);
    let swapped = Tree::new([TreeNode::Id(1), TreeNode::Id(0)]);
    assert_eq!(
        nested
            .rearrange(&swapped, Some(&selection))
            .unwrap()
            .to_string(),
        "((3,4),2):((2,6),1)"
    );
}

#[test]
fn reverse_rearrange_gives_the_trees_of_the_way_back() {
    use TreeNode::{Id, Leaf};
    let flat = |items: Vec<TreeNode>| Tree::new(items);
    // A permutation: source k went to position output.index(k).
    let (out, sel) = Tree::reverse_rearrange(
        &flat(vec![Id(2), Id(0), Id(1)]),
        &flat(vec![Leaf, Leaf, Leaf]),
    )
    .unwrap();
    assert_eq!(out, flat(vec![Id(1), Id(2), Id(0)]));
    assert_eq!(sel, flat(vec![Leaf, Leaf, Leaf]));
    // An inserted singleton is one more source on the way back, and nobody's destination.
    let (out, sel) =
        Tree::reverse_rearrange(&flat(vec![Id(1), Leaf, Id(0)]), &flat(vec![Leaf, Leaf])).unwrap();
    assert_eq!(
        (out, sel),
        (flat(vec![Id(2), Id(0)]), flat(vec![Leaf, Leaf, Leaf]))
    );
    // A nested output is selected as nested; an omitted source comes back as a plain leaf.
    let nested = flat(vec![TreeNode::Tree(flat(vec![Id(1), Id(2)])), Id(0)]);
    let (out, sel) = Tree::reverse_rearrange(&nested, &flat(vec![Leaf, Leaf, Leaf])).unwrap();
    assert_eq!(out, flat(vec![Id(2), Id(0), Id(1)]));
    assert_eq!(
        sel,
        flat(vec![TreeNode::Tree(flat(vec![Leaf, Leaf])), Leaf])
    );
    let (out, sel) = Tree::reverse_rearrange(&flat(vec![Id(0)]), &flat(vec![Leaf, Leaf])).unwrap();
    assert_eq!((out, sel), (flat(vec![Id(0), Leaf]), flat(vec![Leaf])));
    // Forward then back restores the structure; the omitted singleton returns as 1:0.
    let a = layout("(2,1,3):(1,99,2)");
    let output = flat(vec![Id(2), Id(0)]);
    let selection = flat(vec![Leaf, Leaf, Leaf]);
    let there = a.rearrange(&output, Some(&selection)).unwrap();
    let (out, sel) = Tree::reverse_rearrange(&output, &selection).unwrap();
    assert_eq!(
        there.rearrange(&out, Some(&sel)).unwrap().to_string(),
        "(2,1,3):(1,0,2)"
    );
    assert!(error(Tree::reverse_rearrange(
        &flat(vec![Id(0), Id(0)]),
        &flat(vec![Leaf, Leaf])
    ))
    .contains("places source 0 twice"));
    assert!(error(Tree::reverse_rearrange(
        &flat(vec![Id(2)]),
        &flat(vec![Leaf, Leaf])
    ))
    .contains("names source 2 of only 2 selected"));
}

#[test]
fn scenario_08_permute_moves_nested_modes_whole() {
    let a = layout("[2,[3,4],5]:[1,[2,6],24]");
    assert_eq!(
        a.permute(&[1, 0, 2]).unwrap().to_string(),
        "((3,4),2,5):((2,6),1,24)"
    );
    assert!(error(a.permute(&[0, 1])).contains("needs 3 positions"));
    assert!(error(a.permute(&[0, 0, 1])).contains("repeats mode 0"));
    assert!(error(a.permute(&[0, 1, 3])).contains("names mode 3"));
}

#[test]
fn scenario_09_composition_results() {
    let exact = |outer: &str, inner: &str| {
        layout(outer)
            .compose(&layout(inner))
            .unwrap()
            .into_layout()
            .unwrap()
            .to_string()
    };
    assert_eq!(exact("20:2", "(5,4):(4,1)"), "(5,4):(8,2)");
    assert_eq!(exact("(6,2):(8,2)", "(4,3):(3,1)"), "((2,2),3):((24,2),8)");
    assert_eq!(exact("(2,4):(8,1)", "(2,4):(4,1)"), "(2,(2,2)):(2,(8,1))");

    let general = layout("(2,2):(1,3)").compose(&layout("4:1")).unwrap();
    assert!(general.as_layout().is_none());
    assert_eq!(general.shape(), &shape(4));
    assert_eq!(general.codomain_size(), 5);
    let values: Vec<usize> = (0..4).map(|i| general.apply(i).unwrap()).collect();
    assert_eq!(values, [0, 1, 3, 4]);

    assert!(error(layout("2:1").compose(&layout("3:1"))).contains("reaches 3 but 2:1 has size 2"));
}

#[test]
fn scenario_10_composition_with_tiler_and_shape() {
    let a = layout("(12,(4,8)):(59,(13,1))");
    let tiled = a.compose_tiler(&[layout("3:4"), layout("8:2")]).unwrap();
    assert_eq!(tiled.to_string(), "(3,(2,4)):(236,(26,1))");
    let b = layout("(20,50):(1,20)");
    assert_eq!(
        b.compose_shape(&shape([5, 2])).unwrap().to_string(),
        "(5,2):(1,20)"
    );
    assert_eq!(b.compose_tiler(&[]).unwrap(), b);
    let too_many = [layout("2:1"), layout("2:1"), layout("2:1")];
    assert!(error(b.compose_tiler(&too_many)).contains("too long"));
    assert!(error(b.compose_tiler(&[layout("21:1")])).contains("reaches 21"));
    let nested = layout("((3,4)):((1,10))");
    assert!(error(nested.compose_tiler(&[layout("4:1")])).contains("not divisible"));
}

#[test]
fn scenario_11_complement() {
    assert_eq!(
        layout("(2,2):(1,6)").complement(24).unwrap().to_string(),
        "(3,2):(2,12)"
    );
    assert_eq!(
        layout("4:2").complement(24).unwrap().to_string(),
        "(2,3):(1,8)"
    );
    assert_eq!(layout("4:1").complement(4).unwrap(), Layout::scalar());
    assert!(error(layout("(2,2):(1,1)").complement(8)).contains("overlaps with itself"));
    assert!(error(layout("4:2").complement(7)).contains("beyond the cotarget 7"));
    assert!(error(layout("4:2").complement(12)).contains("not a multiple"));
}

#[test]
fn scenario_12_divide_and_zipped_divide() {
    let a = layout("(4,2,3):(2,1,8)");
    assert_eq!(
        a.divide(&layout("4:2")).unwrap().to_string(),
        "((2,2),(2,3)):((4,1),(2,8))"
    );
    let b = layout("(8,6):(1,8)");
    let tiles = [layout("2:1"), layout("3:1")];
    assert_eq!(
        b.zipped_divide(&tiles).unwrap().to_string(),
        "((2,3),(4,2)):((1,8),(2,24))"
    );
    assert_eq!(
        b.divide_tiler(&tiles).unwrap().to_string(),
        "((2,4),(3,2)):((1,2),(8,24))"
    );
    assert!(error(layout("6:1").divide(&layout("4:1"))).contains("not a multiple"));
}

#[test]
fn scenario_13_coalesce() {
    assert_eq!(layout("(2,3):(2,4)").coalesce().to_string(), "6:2");
    assert_eq!(layout("(4,2):(0,0)").coalesce().to_string(), "8:0");
}

#[test]
fn scenario_14_slicing() {
    let a = layout("(5,10):(1,5)");
    let (offset, view) = a
        .slice(&[SliceKey::Index(2), SliceKey::stepped(1, 9, 2)])
        .unwrap();
    assert_eq!((offset, view.to_string()), (7, "4:10".to_string()));
    assert!(error(a.slice(&[SliceKey::all(), SliceKey::stepped(1, 6, 2)])).contains("evenly"));
    let reversed = SliceKey::Range {
        start: None,
        stop: None,
        step: Some(-1),
    };
    assert!(error(a.slice(&[SliceKey::all(), reversed])).contains("step must be >= 1"));
    assert!(error(a.slice(&[SliceKey::from(2..5)])).contains("one key per mode"));
}

#[test]
fn scenario_15_reshape() {
    let a = layout("(2,3):(2,4)");
    assert_eq!(
        a.reshape(&shape((3, (2,)))).unwrap().to_string(),
        "(3,(2)):(2,(6))"
    );
    assert!(error(layout("(2,3):(1,3)").reshape(&shape(6))).contains("one leaf"));
    assert!(error(a.reshape(&shape(5))).contains("changes the size"));
}

#[test]
fn scenario_16_as_strided_and_broadcast_in_dim() {
    let a = layout("(5,4):(4,1)");
    assert_eq!(
        a.as_strided(&layout("(2,2):(1,2)")).unwrap().to_string(),
        "(2,2):(4,8)"
    );
    assert!(error(a.as_strided(&layout("(2,2):(1,1)"))).contains("not injective"));
    assert_eq!(
        layout("2:1")
            .broadcast_in_dim(&shape([3, 2]), &[1])
            .unwrap()
            .to_string(),
        "(3,2):(0,1)"
    );
    assert!(error(layout("2:1").broadcast_in_dim(&shape([3, 2]), &[2])).contains("out of range"));
}

#[test]
fn shape_encode_lets_an_integer_stand_for_a_subtree() {
    let s = shape((5, (20, 4)));
    assert_eq!(s.encode(&(4, 42).into()).unwrap(), 214);
    assert_eq!(s.encode(&(4, (2, 2)).into()).unwrap(), 214);
    assert_eq!(s.decode(214).unwrap(), IntTuple::from((4, (2, 2))));
    let scalar = Shape::scalar();
    assert_eq!(scalar.encode(&0.into()).unwrap(), 0);
    assert_eq!(scalar.encode(&().into()).unwrap(), 0);
    assert!(error(scalar.encode(&1.into())).contains("out of range"));
}

#[test]
fn shape_and_stride_construction_rules() {
    assert_eq!(
        shape((2, (3, 4))),
        shape([IntTuple::from(2), (3, 4).into()])
    );
    assert!(error(Shape::new((2, 0))).contains("extents must be >= 1, got 0"));
    assert!(error(Stride::new((1, -2))).contains("must be >= 0, got -2"));
    assert!(error(Shape::new((1i64 << 32, 1i64 << 32))).contains("overflows"));
    let s = shape((2, (3, 4)));
    assert_eq!((s.size(), s.rank(), s.depth()), (24, 2, 2));
    assert_eq!(
        s.profile().tokens(),
        [
            ProfileToken::Leaf,
            ProfileToken::Push,
            ProfileToken::Leaf,
            ProfileToken::Leaf,
            ProfileToken::Pop
        ]
    );
    assert_eq!(s.mode(1).unwrap(), shape((3, 4)));
    assert_eq!(Shape::scalar().depth(), 1);
}

#[test]
fn layout_needs_identical_trees_and_a_cosize_within_i64() {
    let mismatched = Layout::new(shape((2, 3)), Stride::new((1, (2,))).unwrap());
    assert!(error(mismatched).contains("different trees"));
    let huge = Layout::from_flat(&[3], &[(i64::MAX / 2) as usize + 1]);
    assert!(error(huge).contains("cosize beyond i64::MAX"));
}

#[test]
fn decision_too_few_coordinates_are_rejected_not_padded() {
    let a = layout("(3,4,5):(1,3,12)");
    assert!(error(a.index(&(1, 2).into())).contains("has 2 entries"));
}

#[test]
fn decision_empty_layouts_coalesce_and_complement() {
    assert_eq!(Layout::scalar().coalesce().to_string(), "1:0");
    assert_eq!(layout("(1,1):(5,7)").coalesce().to_string(), "1:0");
    assert_eq!(Layout::scalar().complement(6).unwrap().to_string(), "6:1");
    assert_eq!(
        layout("(1,4):(9,0)").complement(1).unwrap(),
        Layout::scalar()
    );
    assert_eq!(
        layout("(4,2):(0,1)").complement(4).unwrap().to_string(),
        "2:2"
    );
}

#[test]
fn notation_prints_and_parses_every_form() {
    for text in [
        "(4,(2,3)):(1,(4,8))",
        "8:2",
        "():()",
        "((2,3)):((1,2))",
        "(4,()):(1,())",
    ] {
        let parsed = layout(text);
        assert_eq!(parsed.to_string(), text);
        assert_eq!(layout(&parsed.to_string()), parsed);
    }
    assert_eq!(
        layout(" [ 2 , [3,4] ] : [1,[2,6]] ").to_string(),
        "(2,(3,4)):(1,(2,6))"
    );
}

#[test]
fn notation_names_the_position_of_a_malformed_string() {
    assert_eq!(
        error("(4,2):(1".parse::<Layout>()),
        "malformed Layout \"(4,2):(1\": expected ',' or ')' at position 8, found the end"
    );
    assert!(error("(4,2)(1,2)".parse::<Layout>()).contains("expected ':' at position 5"));
    assert!(error("(4,-2):(1,2)".parse::<Layout>()).contains("position 3, found '-'"));
    assert!(error("(4,2]:(1,2)".parse::<Layout>()).contains("',' or ')' at position 4"));
    assert!(error("99999999999999999999:1".parse::<Layout>()).contains("exceeds i64::MAX"));
    assert!(error("(4,2):(1,(2))".parse::<Layout>()).contains("different trees"));
}

#[test]
fn with_leaves_keeps_the_tree() {
    let s = shape((2, (3, 4)));
    assert_eq!(s.with_leaves(&[5, 1, 7]).unwrap(), shape((5, (1, 7))));
    assert!(error(s.with_leaves(&[5, 1])).contains("has 3 leaves, got 2 extents"));
    assert!(error(s.with_leaves(&[5, 0, 1])).contains("must be >= 1"));
}

#[test]
fn with_leaf_strides_pairs_a_shape_with_strides() {
    let l = Layout::with_leaf_strides(shape((2, (3, 4))), &[1, 0, 6]).unwrap();
    assert_eq!(l.to_string(), "(2,(3,4)):(1,(0,6))");
    assert!(
        error(Layout::with_leaf_strides(shape(2), &[1, 2])).contains("has 1 leaves, got 2 strides")
    );
}

#[test]
fn is_column_major_only_for_the_running_product_strides() {
    assert!(layout("(2,3):(1,2)").is_column_major());
    assert!(layout("(3,(2,4)):(1,(3,6))").is_column_major());
    assert!(Layout::column_major(shape((1, 4))).is_column_major());
    assert!(Layout::scalar().is_column_major());
    // An extent-1 leaf with another stride is dense but not the canonical layout.
    assert!(!layout("(1,4):(7,1)").is_column_major());
    assert!(!layout("(2,3):(3,1)").is_column_major());
    assert!(!layout("(2,3):(1,4)").is_column_major());
    assert!(!layout("(4):(0)").is_column_major());
}

#[test]
fn slice_keys_apply_exactly_the_documented_rules() {
    let a: Layout = "(10,3):(1,10)".parse().unwrap();
    let range = |start, stop, step| SliceKey::Range { start, stop, step };
    // Negative bounds count from the end and out-of-range bounds clamp, as in Python.
    let (offset, view) = a
        .slice(&[range(Some(-4), None, None), SliceKey::all()])
        .unwrap();
    assert_eq!((offset, view.to_string()), (6, "(4,3):(1,10)".to_string()));
    let (offset, view) = a
        .slice(&[range(Some(-100), Some(100), Some(5)), SliceKey::Index(1)])
        .unwrap();
    assert_eq!((offset, view.to_string()), (10, "2:5".to_string()));
    // A negative index is an error, not counted from the end.
    let error = a
        .slice(&[SliceKey::Index(-1), SliceKey::all()])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "slice index -1 is out of range [0, 10) for mode 0 of Layout (10,3):(1,10)"
    );
    // Unlike Python: an uneven step, an empty range and a step below 1 are errors.
    let uneven = a.slice(&[range(Some(0), Some(10), Some(3)), SliceKey::all()]);
    assert_eq!(
        uneven.unwrap_err().to_string(),
        "slice 0:10:3 of mode 0 of Layout (10,3):(1,10) does not divide evenly"
    );
    let empty = a.slice(&[range(Some(5), Some(5), None), SliceKey::all()]);
    assert_eq!(
        empty.unwrap_err().to_string(),
        "slice 5:5 of mode 0 of Layout (10,3):(1,10) is empty"
    );
    let backwards = a.slice(&[range(None, None, Some(-1)), SliceKey::all()]);
    assert_eq!(
        backwards.unwrap_err().to_string(),
        "slice step must be >= 1, got -1 for mode 0 of Layout (10,3):(1,10)"
    );
    // A nested mode takes only the full range.
    let nested: Layout = "((2,5),3):((1,2),10)".parse().unwrap();
    let partial = nested.slice(&[range(Some(0), None, None), SliceKey::all()]);
    assert_eq!(
        partial.unwrap_err().to_string(),
        "slice of nested mode 0 of Layout ((2,5),3):((1,2),10) accepts only the full range ':'"
    );
}

#[test]
fn a_shape_without_strides_is_told_how_a_layout_is_written() {
    let message = error("(2,3)".parse::<Layout>());
    assert_eq!(
        message,
        "malformed Layout \"(2,3)\": a layout is written shape:stride and this one has no \
         stride; the column-major layout of that shape is \"(2,3):(1,2)\""
    );
    assert!(error("4".parse::<Layout>()).contains("is \"4:1\""));
}
