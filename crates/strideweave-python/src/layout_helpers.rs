//! The original StrideWeave's static helpers of `Layout` (`leaf`, `get_index`, `infix`,
//! `extract_profile`, `flatten_layout`, `rearrange`, `reverse_rearrange`, `coalesce_by_mode`,
//! `choose`, `modout`, `make_layout`, `empty`), over the core's layout algebra; the
//! conversions between the package's `Tree` and `Node` values (`strideweave.layout`) and the
//! algebra's trees; and the permutation orders and mode slices `Layout` takes.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PySlice, PyTuple};
use strideweave::layout::{ProfileToken, Tree, TreeNode, MAX_NESTING};
use strideweave::Layout;

use crate::convert::type_name;
use crate::layout::layout_err;

/// The package's tree markers: `Node.Leaf`, `Node.Push`, `Node.Pop`, the class of `Node.id(k)`
/// leaves, and the `Tree` class.
struct Markers<'py> {
    leaf: Bound<'py, PyAny>,
    push: Bound<'py, PyAny>,
    pop: Bound<'py, PyAny>,
    named_leaf: Bound<'py, PyAny>,
    tree: Bound<'py, PyAny>,
}

fn markers(py: Python<'_>) -> PyResult<Markers<'_>> {
    let values = py.import("strideweave._layout_values")?;
    let node = values.getattr("Node")?;
    Ok(Markers {
        leaf: node.getattr("Leaf")?,
        push: node.getattr("Push")?,
        pop: node.getattr("Pop")?,
        named_leaf: values.getattr("_NodeLeaf")?,
        tree: values.getattr("Tree")?,
    })
}

/// The algebra's tree of a `Tree` argument (any tuple of `Node.Leaf`, `Node.id(k)`, ints
/// standing for leaves, and nested tuples), nested at most `MAX_NESTING` levels; `what`
/// names the argument.
pub fn tree_arg(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Tree> {
    let markers = markers(object.py())?;
    if object.cast::<PyTuple>().is_err() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a Tree, got {}",
            type_name(object)
        )));
    }
    to_tree(object, &markers, what, 1)
}

fn to_tree(
    object: &Bound<'_, PyAny>,
    markers: &Markers<'_>,
    what: &str,
    depth: usize,
) -> PyResult<Tree> {
    if depth > MAX_NESTING {
        return Err(PyValueError::new_err(format!(
            "{what} nests deeper than the limit of {MAX_NESTING} levels (MAX_NESTING)"
        )));
    }
    let tuple = object.cast::<PyTuple>()?;
    let mut items = Vec::with_capacity(tuple.len());
    for item in tuple.iter() {
        let node = if item.cast::<PyTuple>().is_ok() {
            TreeNode::Tree(to_tree(&item, markers, what, depth + 1)?)
        } else if item.is(&markers.leaf) {
            TreeNode::Leaf
        } else if item.is_instance(&markers.named_leaf)? {
            TreeNode::Id(item.getattr("id")?.extract()?)
        } else if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() {
            TreeNode::Leaf
        } else {
            return Err(PyTypeError::new_err(format!(
                "{what} must hold Node.Leaf, Node.id(k) or int leaves and nested Trees, got {}",
                type_name(&item)
            )));
        };
        items.push(node);
    }
    Ok(Tree::new(items))
}

/// The package's `Tree` of an algebra tree.
pub fn py_tree(py: Python<'_>, tree: &Tree) -> PyResult<Py<PyAny>> {
    let markers = markers(py)?;
    to_py_tree(py, tree, &markers).map(Bound::unbind)
}

fn to_py_tree<'py>(
    py: Python<'py>,
    tree: &Tree,
    markers: &Markers<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let items = tree
        .items()
        .iter()
        .map(|item| match item {
            TreeNode::Leaf => Ok(markers.leaf.clone()),
            TreeNode::Id(k) => markers.named_leaf.call1((*k,)),
            TreeNode::Tree(sub) => to_py_tree(py, sub, markers),
        })
        .collect::<PyResult<Vec<_>>>()?;
    markers.tree.call1(PyTuple::new(py, items)?)
}

/// The rank-1 layout `extent:stride` (`Layout.leaf`).
pub fn leaf(extent: usize, stride: usize) -> PyResult<Layout> {
    Layout::from_flat(&[extent], &[stride]).map_err(layout_err)
}

/// Whether `layout` is one leaf (or empty): rank at most 1, not nested.
pub fn is_leaf(layout: &Layout) -> bool {
    layout.rank() <= 1 && layout.depth() <= 1
}

/// The `(extent, stride)` of each leaf, depth first (`Layout.infix`).
pub fn infix(layout: &Layout) -> Vec<(usize, usize)> {
    layout.leaf_pairs().collect()
}

/// `Layout.extract_profile`: every leaf as a rank-1 layout, depth first, without a profile;
/// with one, the mode (or the part of a nested mode) at each leaf of the profile.
pub fn extract_profile(layout: &Layout, profile: Option<&Tree>) -> PyResult<Vec<Layout>> {
    let Some(profile) = profile else {
        return infix(layout)
            .into_iter()
            .map(|(extent, stride)| leaf(extent, stride))
            .collect();
    };
    let mut extracted = Vec::new();
    extract(layout, profile, &mut extracted)?;
    Ok(extracted)
}

fn extract(layout: &Layout, profile: &Tree, extracted: &mut Vec<Layout>) -> PyResult<()> {
    if layout.rank() != profile.items().len() {
        return Err(PyValueError::new_err(format!(
            "layout and tree profile do not match: Layout('{layout}') has {} modes where the \
             profile has {} items",
            layout.rank(),
            profile.items().len()
        )));
    }
    for (k, item) in profile.items().iter().enumerate() {
        let mode = layout.mode(k).map_err(layout_err)?;
        match item {
            TreeNode::Leaf | TreeNode::Id(_) => extracted.push(mode),
            TreeNode::Tree(sub) => extract(&mode, sub, extracted)?,
        }
    }
    Ok(())
}

/// `Layout.flatten_layout`: the leaves as one flat layout, and the recipe (`Node.Leaf`,
/// `Node.Push`, `Node.Pop`) that nests them back.
pub fn flatten(py: Python<'_>, layout: &Layout) -> PyResult<(Layout, Vec<Py<PyAny>>)> {
    let markers = markers(py)?;
    let (extents, strides): (Vec<usize>, Vec<usize>) = layout.leaf_pairs().unzip();
    let flat = Layout::from_flat(&extents, &strides).map_err(layout_err)?;
    let recipe = layout
        .profile()
        .tokens()
        .iter()
        .map(|token| {
            match token {
                ProfileToken::Leaf => &markers.leaf,
                ProfileToken::Push => &markers.push,
                ProfileToken::Pop => &markers.pop,
            }
            .clone()
            .unbind()
        })
        .collect();
    Ok((flat, recipe))
}

/// `Layout.coalesce_by_mode`: each part the profile extracts, coalesced, nested back in the
/// profile's structure. A part that is one leaf has nothing to merge and stays as it is.
pub fn coalesce_by_mode(layout: &Layout, profile: &Tree) -> PyResult<Layout> {
    let coalesced: Vec<Layout> = extract_profile(layout, Some(profile))?
        .iter()
        .map(|part| {
            if is_leaf(part) {
                part.clone()
            } else {
                part.coalesce()
            }
        })
        .collect();
    let mut parts = coalesced.into_iter();
    bake(profile, &mut parts)
}

fn bake(profile: &Tree, parts: &mut std::vec::IntoIter<Layout>) -> PyResult<Layout> {
    let modes = profile
        .items()
        .iter()
        .map(|item| match item {
            TreeNode::Leaf | TreeNode::Id(_) => parts
                .next()
                .ok_or_else(|| PyValueError::new_err("the profile has more leaves than parts")),
            TreeNode::Tree(sub) => bake(sub, parts),
        })
        .collect::<PyResult<Vec<_>>>()?;
    Layout::from_modes(&modes).map_err(layout_err)
}

/// The `(extent, stride)` of each top-level mode of `layout`, which must all be leaves;
/// `what` names the helper.
fn leaf_modes(layout: &Layout, what: &str) -> PyResult<Vec<(usize, usize)>> {
    (0..layout.rank())
        .map(|k| {
            let mode = layout.mode(k).map_err(layout_err)?;
            let first = mode.leaf_pairs().next();
            match (is_leaf(&mode), first) {
                (true, Some(pair)) => Ok(pair),
                _ => Err(PyValueError::new_err(format!(
                    "{what} needs every top-level mode of Layout('{layout}') to be a leaf; mode \
                     {k} is {mode}"
                ))),
            }
        })
        .collect()
}

/// `Layout.choose(A, d)`: the layout of every `d`-th element of `A` (strides times `d`,
/// extents divided by what `d` consumes, mode by mode).
pub fn choose(layout: &Layout, d: usize) -> PyResult<Layout> {
    let cannot = |detail: String| {
        PyValueError::new_err(format!(
            "Can not choose the {d}-th element of Layout('{layout}'){detail}"
        ))
    };
    if d == 0 || !layout.size().is_multiple_of(d) {
        return Err(cannot(format!(
            ": its size {} is not a multiple of {d}",
            layout.size()
        )));
    }
    let mut remaining = d;
    let mut extents = Vec::new();
    let mut strides = Vec::new();
    for (extent, stride) in leaf_modes(layout, "choose")? {
        let scaled = |factor: usize| {
            factor
                .checked_mul(stride)
                .ok_or_else(|| cannot(": a stride overflows".to_owned()))
        };
        if remaining == 1 {
            extents.push(extent);
            strides.push(stride);
        } else if extent > remaining {
            if !extent.is_multiple_of(remaining) {
                return Err(cannot(format!(
                    ", {extent} can not be reduced by {remaining}"
                )));
            }
            strides.push(scaled(remaining)?);
            extents.push(extent / remaining);
            remaining = 1;
        } else {
            if !remaining.is_multiple_of(extent) {
                return Err(cannot(format!(
                    ", {extent} can not be reduced by {remaining}"
                )));
            }
            strides.push(scaled(remaining)?);
            extents.push(1);
            remaining /= extent;
        }
    }
    Layout::from_flat(&extents, &strides).map_err(layout_err)
}

/// `Layout.modout(A, s)`: `A` with its extents cut so that the modes, first fastest, cover
/// `s` elements (the strides unchanged).
pub fn modout(layout: &Layout, s: usize) -> PyResult<Layout> {
    if s == 0 {
        return Err(PyValueError::new_err(format!(
            "modout of Layout('{layout}') needs a positive size, got 0"
        )));
    }
    let mut covered = 1usize;
    let mut extents = Vec::new();
    let modes = leaf_modes(layout, "modout")?;
    for &(extent, _) in &modes {
        if covered == s {
            extents.push(1);
        } else if extent.checked_mul(covered).is_some_and(|reach| reach <= s) {
            extents.push(extent);
            covered *= extent;
        } else {
            if !s.is_multiple_of(covered) {
                return Err(PyValueError::new_err(format!(
                    "Shape divisibility condition not met for Layout('{layout}') and {s}"
                )));
            }
            extents.push(s / covered);
            covered = s;
        }
    }
    let strides: Vec<usize> = modes.iter().map(|&(_, stride)| stride).collect();
    Layout::from_flat(&extents, &strides).map_err(layout_err)
}

/// The modes of `layout` a slice selects, as one layout (a leaf mode stays a leaf, a nested
/// mode stays nested).
pub fn slice_modes(layout: &Layout, slice: &Bound<'_, PySlice>) -> PyResult<Layout> {
    let rank = isize::try_from(layout.rank()).unwrap_or(isize::MAX);
    let bounds = slice.indices(rank)?;
    let mut modes = Vec::new();
    let mut k = bounds.start;
    while (bounds.step > 0 && k < bounds.stop) || (bounds.step < 0 && k > bounds.stop) {
        let index = usize::try_from(k)
            .map_err(|_| PyValueError::new_err("a Layout slice selects a negative mode"))?;
        modes.push(layout.mode(index).map_err(layout_err)?);
        k += bounds.step;
    }
    Layout::from_modes(&modes).map_err(layout_err)
}

/// A permutation order given as ints (`permute(1, 0)`) or as one sequence of them
/// (`permute([1, 0])`); every entry must be an int (`TypeError`) naming a mode
/// (`ValueError` for a negative one).
pub fn permute_order(order: &Bound<'_, PyTuple>) -> PyResult<Vec<usize>> {
    let single = (order.len() == 1)
        .then(|| order.get_item(0).ok())
        .flatten()
        .filter(|only| !only.is_instance_of::<PyInt>());
    let entries: Vec<Bound<'_, PyAny>> = match single {
        Some(sequence) => sequence
            .try_iter()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "permute order must be ints or one sequence of ints, got {}",
                    type_name(&sequence)
                ))
            })?
            .collect::<PyResult<_>>()?,
        None => order.iter().collect(),
    };
    entries
        .iter()
        .map(|entry| {
            if !entry.is_instance_of::<PyInt>() || entry.is_instance_of::<PyBool>() {
                return Err(PyTypeError::new_err(format!(
                    "permute order entries must be ints, got {}",
                    type_name(entry)
                )));
            }
            let value: i64 = entry.extract()?;
            usize::try_from(value).map_err(|_| {
                PyValueError::new_err(format!(
                    "permute order names mode {value}, which is negative"
                ))
            })
        })
        .collect()
}
