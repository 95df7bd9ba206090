//! Post-conditions of every layout operation, checked by brute force over every coordinate
//! of randomly generated layouts (docs/conventions.md, Property tests by post-condition).

use std::collections::HashSet;

use proptest::prelude::*;
use strideweave_layout::{IndexMap, IntTuple, Layout, Shape, SliceKey};

/// A nested tree of leaves, as a written `IntTuple`, from a flat list of values.
fn nest(values: &[i64], cuts: &[bool]) -> Vec<IntTuple> {
    let mut modes = Vec::new();
    let mut i = 0;
    while i < values.len() {
        if cuts.get(i).copied().unwrap_or(false) && i + 1 < values.len() {
            modes.push(IntTuple::from(vec![values[i], values[i + 1]]));
            i += 2;
        } else {
            modes.push(IntTuple::Int(values[i]));
            i += 1;
        }
    }
    modes
}

/// Builds a layout from leaves, grouping some neighbours into nested modes.
fn build(leaves: &[(usize, usize)], cuts: &[bool]) -> Layout {
    let extents: Vec<i64> = leaves.iter().map(|l| l.0 as i64).collect();
    let strides: Vec<i64> = leaves.iter().map(|l| l.1 as i64).collect();
    let shape = Shape::new(nest(&extents, cuts)).expect("generated shape");
    let stride = strideweave_layout::Stride::new(nest(&strides, cuts)).expect("generated stride");
    Layout::new(shape, stride).expect("generated layout")
}

/// Any layout: small extents, strides in 0..12, up to five leaves, some nesting.
fn any_layout() -> impl Strategy<Value = Layout> {
    (
        prop::collection::vec((1usize..6, 0usize..12), 0..5),
        prop::collection::vec(any::<bool>(), 5),
    )
        .prop_map(|(leaves, cuts)| build(&leaves, &cuts))
}

/// A compact layout of random extents whose strides are a permutation of the column-major
/// ones, optionally scaled: the layouts tilings and tensors are made of.
fn nice_layout() -> impl Strategy<Value = Layout> {
    (
        prop::collection::vec(1usize..5, 0..5),
        any::<u64>(),
        1usize..3,
        prop::collection::vec(any::<bool>(), 5),
    )
        .prop_map(|(extents, seed, scale, cuts)| {
            let mut order: Vec<usize> = (0..extents.len()).collect();
            let mut state = seed;
            for i in (1..order.len()).rev() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                order.swap(i, (state >> 33) as usize % (i + 1));
            }
            let mut strides = vec![0; extents.len()];
            let mut running = scale;
            for &k in &order {
                strides[k] = running;
                running *= extents[k];
            }
            let leaves: Vec<(usize, usize)> = extents.into_iter().zip(strides).collect();
            build(&leaves, &cuts)
        })
}

fn some_layout() -> impl Strategy<Value = Layout> {
    prop_oneof![any_layout(), nice_layout()]
}

/// Layouts that reach the search phase of the injectivity decision: three to six
/// non-trivial leaves with unrelated strides, at most 20,000 coordinates.
fn tangled_layout() -> impl Strategy<Value = Layout> {
    (
        prop::collection::vec((2usize..8, 1usize..60), 3..7),
        prop::collection::vec(any::<bool>(), 6),
    )
        .prop_map(|(mut leaves, cuts)| {
            while leaves.iter().map(|l| l.0).product::<usize>() > 20_000 {
                leaves.pop();
            }
            build(&leaves, &cuts)
        })
}

fn values(map: &impl IndexMap) -> Vec<usize> {
    (0..map.size())
        .map(|i| map.apply(i).expect("in-domain ordinal"))
        .collect()
}

fn brute_injective(layout: &Layout) -> bool {
    let all = values(layout);
    all.iter().collect::<HashSet<_>>().len() == all.len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn notation_round_trips(layout in some_layout()) {
        let text = layout.to_string();
        prop_assert_eq!(text.parse::<Layout>().unwrap(), layout.clone());
        prop_assert_eq!(layout.shape().to_string().parse::<Shape>().unwrap(), layout.shape().clone());
    }

    #[test]
    fn cached_measures_and_mode_leaves_agree_with_their_definitions(layout in some_layout()) {
        let leaves: Vec<(usize, usize)> = layout.leaf_pairs().collect();
        let size: usize = leaves.iter().map(|l| l.0).product();
        let cosize = 1 + leaves.iter().map(|&(e, s)| s * (e - 1)).sum::<usize>();
        prop_assert_eq!(layout.size(), size);
        prop_assert_eq!(layout.cosize(), cosize);
        prop_assert_eq!(layout.is_column_major(), layout == Layout::column_major(layout.shape().clone()));
        prop_assert_eq!(layout.rank(), layout.shape().rank());
        let modes = layout.modes();
        prop_assert_eq!(modes.len(), layout.rank());
        for (k, expected) in modes.iter().enumerate() {
            prop_assert_eq!(&layout.mode(k).unwrap(), expected);
            prop_assert_eq!(layout.mode(k).unwrap().to_string(), expected.to_string());
            prop_assert_eq!(&layout.shape().mode(k).unwrap(), expected.shape());
            let mode: Vec<(usize, usize)> = layout.mode(k).unwrap().leaf_pairs().collect();
            prop_assert_eq!(layout.mode_leaves(k).unwrap(), mode.as_slice());
        }
        prop_assert!(layout.mode_leaves(layout.rank()).is_none());
    }

    #[test]
    fn indices_step_through_index_of_in_ordinal_order(layout in some_layout()) {
        let stepped: Vec<usize> = layout.indices().collect();
        let decoded: Vec<usize> = (0..layout.size()).map(|i| layout.index_of(i).unwrap()).collect();
        prop_assert_eq!(layout.indices().len(), layout.size());
        prop_assert_eq!(stepped, decoded);
    }

    #[test]
    fn index_agrees_with_encode_decode_and_leaf_coordinates(layout in some_layout()) {
        let shape = layout.shape();
        for i in 0..layout.size() {
            let coord = shape.decode(i).unwrap();
            prop_assert_eq!(shape.encode(&coord).unwrap(), i);
            prop_assert_eq!(layout.index(&coord).unwrap(), layout.index_of(i).unwrap());
            let mut rest = i;
            let leaf_coords: Vec<usize> = shape.leaves().iter().map(|e| { let c = rest % e; rest /= e; c }).collect();
            prop_assert_eq!(layout.index_of_leaves(&leaf_coords).unwrap(), layout.index_of(i).unwrap());
            prop_assert!(layout.index_of(i).unwrap() < layout.cosize());
        }
        prop_assert!(layout.index_of(layout.size()).is_err());
    }

    #[test]
    fn cosize_is_one_past_the_largest_index(layout in some_layout()) {
        prop_assert_eq!(values(&layout).into_iter().max().unwrap_or(0) + 1, layout.cosize());
    }

    #[test]
    fn is_injective_is_exact(layout in some_layout()) {
        prop_assert_eq!(layout.is_injective(), brute_injective(&layout));
        prop_assert_eq!(layout.try_is_injective(), Ok(brute_injective(&layout)));
    }

    #[test]
    fn injectivity_decision_matches_enumeration_on_tangled_strides(layout in tangled_layout()) {
        // The brute-force enumeration of every index is the oracle; the decision must be
        // exact (never undecided on layouts this small).
        prop_assert_eq!(layout.try_is_injective(), Ok(brute_injective(&layout)), "{}", layout);
        prop_assert_eq!(layout.injectivity(), Some(brute_injective(&layout)));
    }

    #[test]
    fn coalesce_preserves_the_function(layout in some_layout()) {
        let coalesced = layout.coalesce();
        prop_assert_eq!(coalesced.size(), layout.size());
        prop_assert!(coalesced.profile().is_flat());
        prop_assert_eq!(values(&coalesced), values(&layout));
        prop_assert_eq!(coalesced.coalesce(), coalesced.clone());
    }

    #[test]
    fn filter_keeps_the_image_without_broadcast_modes(layout in some_layout()) {
        let filtered = layout.filter();
        let image: HashSet<usize> = values(&layout).into_iter().collect();
        let filtered_image: HashSet<usize> = values(&filtered).into_iter().collect();
        prop_assert_eq!(image, filtered_image);
        prop_assert!(filtered.size() == 1 || filtered.leaf_pairs().all(|(_, s)| s > 0));
    }

    #[test]
    fn composition_is_outer_after_inner(outer in some_layout(), inner in some_layout()) {
        prop_assume!(inner.cosize() <= outer.size());
        let composed = outer.compose(&inner).unwrap();
        prop_assert_eq!(composed.size(), inner.size());
        for i in 0..inner.size() {
            let expected = outer.index_of(inner.index_of(i).unwrap()).unwrap();
            prop_assert_eq!(composed.apply(i).unwrap(), expected);
        }
        if let Some(layout) = composed.as_layout() {
            prop_assert_eq!(layout.rank(), inner.rank());
        }
    }

    #[test]
    fn composition_beyond_the_outer_domain_fails(outer in some_layout(), inner in some_layout()) {
        prop_assume!(inner.cosize() > outer.size());
        prop_assert!(outer.compose(&inner).is_err());
    }

    #[test]
    fn composition_with_a_single_leaf_outer_is_exact_and_scales(inner in some_layout(), extra in 0usize..4, scale in 0usize..4) {
        // A coalescible outer `n:b` is linear, so every inner composes to `inner · b`.
        let outer = Layout::from_flat(&[inner.cosize() + extra], &[scale]).unwrap();
        let composed = outer.compose(&inner).unwrap();
        let layout = composed.as_layout().expect("exact");
        prop_assert_eq!(layout.shape(), inner.shape());
        // Extent-1 leaves carry no information and come back with stride 0.
        let scaled: Vec<usize> = inner.leaf_pairs().map(|(e, s)| if e == 1 { 0 } else { s * scale }).collect();
        prop_assert_eq!(layout.stride().leaves(), scaled.as_slice());
    }

    #[test]
    fn complement_fills_the_gaps(layout in some_layout(), factor in 1usize..4) {
        let filtered = layout.filter();
        prop_assume!(filtered.is_injective());
        let cotarget = filtered.cosize() * factor;
        match layout.complement(cotarget) {
            Ok(complement) => {
                let joined = Layout::from_modes(&[filtered.clone(), complement.clone()]).unwrap();
                prop_assert_eq!(joined.size(), cotarget);
                let mut all = values(&joined);
                all.sort_unstable();
                prop_assert_eq!(all, (0..cotarget).collect::<Vec<_>>());
            }
            Err(e) => {
                // Only strides that do not chain by divisibility may fail.
                prop_assert!(e.message().contains("not a multiple") || e.message().contains("beyond"), "{}", e);
            }
        }
    }

    #[test]
    fn divide_agrees_with_composition(layout in some_layout(), tile in nice_layout()) {
        let Ok(divided) = layout.divide(&tile) else { return Ok(()); };
        let rest = tile.complement(layout.size()).unwrap();
        let inner = Layout::from_modes(&[tile.clone(), rest]).unwrap();
        prop_assert_eq!(divided.rank(), 2);
        prop_assert_eq!(divided.size(), layout.size());
        for i in 0..layout.size() {
            prop_assert_eq!(divided.index_of(i).unwrap(), layout.index_of(inner.index_of(i).unwrap()).unwrap());
        }
    }

    #[test]
    fn zipped_divide_regroups_divide_tiler(layout in nice_layout(), a in nice_layout(), b in nice_layout()) {
        prop_assume!(layout.rank() >= 2);
        let tiles = [a, b];
        let (Ok(per_mode), Ok(zipped)) = (layout.divide_tiler(&tiles), layout.zipped_divide(&tiles)) else {
            prop_assert!(layout.divide_tiler(&tiles).is_err() && layout.zipped_divide(&tiles).is_err());
            return Ok(());
        };
        // per_mode is ((t0,r0),(t1,r1),…), zipped is ((t0,t1),(r0,r1),…): same leaves regrouped.
        let sizes: Vec<(usize, usize)> = (0..2)
            .map(|k| { let m = per_mode.mode(k).unwrap(); (m.mode(0).unwrap().size(), m.mode(1).unwrap().size()) })
            .collect();
        let trailing: usize = (2..layout.rank()).map(|k| layout.mode(k).unwrap().size()).product();
        for t0 in 0..sizes[0].0 { for t1 in 0..sizes[1].0 { for r0 in 0..sizes[0].1 { for r1 in 0..sizes[1].1 { for t in 0..trailing {
            let mut z = vec![IntTuple::from((t0 as i64, t1 as i64)), IntTuple::from((r0 as i64, r1 as i64))];
            let mut p = vec![IntTuple::from((t0 as i64, r0 as i64)), IntTuple::from((t1 as i64, r1 as i64))];
            let mut rest = t;
            for k in 2..layout.rank() {
                let size = layout.mode(k).unwrap().size();
                z.push(IntTuple::Int((rest % size) as i64));
                p.push(IntTuple::Int((rest % size) as i64));
                rest /= size;
            }
            prop_assert_eq!(zipped.index(&IntTuple::Tuple(z)).unwrap(), per_mode.index(&IntTuple::Tuple(p)).unwrap());
        }}}}}
    }

    #[test]
    fn right_inverse_is_a_right_inverse(layout in some_layout()) {
        let inverse = layout.right_inverse();
        for i in 0..inverse.size() {
            prop_assert_eq!(layout.index_of(inverse.index_of(i).unwrap()).unwrap(), i);
        }
    }

    #[test]
    fn right_inverse_of_a_bijection_covers_everything(layout in nice_layout()) {
        let scaled_down = layout.coalesce().leaf_pairs().next().map(|l| l.1).unwrap_or(1);
        prop_assume!(scaled_down <= 1);
        prop_assert_eq!(layout.right_inverse().size(), layout.size());
    }

    #[test]
    fn left_inverse_is_a_left_inverse(layout in some_layout()) {
        if let Ok(inverse) = layout.left_inverse() {
            for i in 0..layout.size() {
                prop_assert_eq!(inverse.index_of(layout.index_of(i).unwrap()).unwrap(), i);
            }
        } else {
            // Only a non-injective layout, or strides that do not chain, have none.
            let chains = layout.filter().leaf_pairs().collect::<Vec<_>>();
            let mut sorted = chains.clone();
            sorted.sort_by_key(|l| l.1);
            let divisible = sorted.windows(2).all(|w| w[1].1 % (w[0].0 * w[0].1) == 0);
            prop_assert!(!layout.is_injective() || !divisible);
        }
    }

    #[test]
    fn logical_product_repeats_the_block(block in nice_layout(), arrangement in some_layout()) {
        let Ok(product) = block.logical_product(&arrangement) else { return Ok(()); };
        let complement = block.complement(block.size() * arrangement.cosize()).unwrap();
        prop_assert_eq!(product.size(), block.size() * arrangement.size());
        for b in 0..arrangement.size() {
            for a in 0..block.size() {
                let expected = block.index_of(a).unwrap()
                    + complement.index_of(arrangement.index_of(b).unwrap()).unwrap();
                prop_assert_eq!(product.index(&IntTuple::from((a as i64, b as i64))).unwrap(), expected);
            }
        }
        if arrangement.is_injective() {
            prop_assert!(product.is_injective());
        }
    }

    #[test]
    fn blocked_product_pairs_modes_of_the_logical_product(block in nice_layout(), arrangement in nice_layout()) {
        let (Ok(blocked), Ok(logical)) = (block.blocked_product(&arrangement), block.logical_product(&arrangement)) else {
            return Ok(());
        };
        prop_assert_eq!(blocked.rank(), block.rank().max(arrangement.rank()));
        let mut blocked_values = values(&blocked);
        let mut logical_values = values(&logical);
        blocked_values.sort_unstable();
        logical_values.sort_unstable();
        prop_assert_eq!(blocked_values, logical_values);
        for k in 0..blocked.rank() {
            let mode = blocked.mode(k).unwrap();
            let block_mode = if k < block.rank() { block.mode(k).unwrap().size() } else { 1 };
            prop_assert_eq!(mode.mode(0).unwrap().size(), block_mode);
        }
    }

    #[test]
    fn slicing_reads_the_same_slots(layout in some_layout(), picks in prop::collection::vec((any::<bool>(), 0usize..6, 1i64..3), 5)) {
        let keys: Vec<SliceKey> = layout.modes().iter().zip(&picks).map(|(mode, &(fix, at, step))| {
            if fix || mode.rank() != 1 || !mode.profile().is_flat() {
                SliceKey::Index((at % mode.size()) as i64)
            } else {
                let n = mode.size() as i64;
                let count = (n - 1) / step + 1;
                SliceKey::stepped(0, count * step, step)
            }
        }).collect();
        let Ok((offset, view)) = layout.slice(&keys) else { return Ok(()); };
        let mut ranges = Vec::new();
        for (mode, key) in layout.modes().iter().zip(&keys) {
            match *key {
                SliceKey::Index(i) => ranges.push(vec![i]),
                SliceKey::Range { step, .. } => {
                    let step = step.unwrap_or(1);
                    ranges.push((0..mode.size() as i64).step_by(step as usize).collect());
                }
            }
        }
        for v in 0..view.size() {
            let mut rest = v;
            let mut coord = Vec::new();
            let kept: Vec<usize> = keys.iter().enumerate().filter(|(_, k)| matches!(k, SliceKey::Range { .. })).map(|(i, _)| i).collect();
            let mut picks_for = vec![0i64; ranges.len()];
            for &k in &kept {
                let n = ranges[k].len();
                picks_for[k] = ranges[k][rest % n];
                rest /= n;
            }
            for (k, r) in ranges.iter().enumerate() {
                coord.push(IntTuple::Int(if kept.contains(&k) { picks_for[k] } else { r[0] }));
            }
            prop_assert_eq!(offset + view.index_of(v).unwrap(), layout.index(&IntTuple::Tuple(coord)).unwrap());
        }
    }

    #[test]
    fn reshape_keeps_the_slots_in_order(layout in nice_layout(), extents in prop::collection::vec(1usize..4, 0..3)) {
        let target = Shape::flat(&extents).unwrap();
        if let Ok(reshaped) = layout.reshape(&target) {
            prop_assert_eq!(values(&reshaped), values(&layout));
        } else {
            prop_assert!(target.size() != layout.size() || layout.coalesce().rank() != 1);
        }
    }
}
