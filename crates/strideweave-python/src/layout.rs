//! `Layout` and the composition of layouts, over the core's layout algebra.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use strideweave::layout::{Composition, IndexMap};
use strideweave::{Error, Layout, LayoutError, Shape, Stride};

use crate::convert::{from_int_tuple, to_index, to_int_tuple, type_name};
use crate::errors::to_py;

/// A layout-algebra failure as its Python exception (always a `ValueError`).
pub fn layout_err(error: LayoutError) -> PyErr {
    to_py(Error::from(error))
}

/// A shape from a Python int tree.
pub fn to_shape(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Shape> {
    Shape::new(to_int_tuple(object, what)?).map_err(layout_err)
}

/// A CuTe-style layout: a hierarchical shape and a stride tree of the same profile.
///
/// `Layout("(4,(2,3)):(1,(4,8))")` parses CuTe's notation and `str(layout)` writes it;
/// `Layout(shape, stride)` takes integer trees, and `Layout(shape)` is column-major
/// (first mode fastest).
#[pyclass(name = "Layout", module = "strideweave", frozen, eq)]
#[derive(Clone, PartialEq, Eq)]
pub struct PyLayout {
    pub(crate) inner: Layout,
}

impl PyLayout {
    /// Wraps a core layout.
    pub fn new_from(inner: Layout) -> PyLayout {
        PyLayout { inner }
    }
}

/// A list or tuple of layouts (a tiler).
fn to_tiler(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Layout>> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = object.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = object.cast::<PyList>() {
        list.iter().collect()
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a list or tuple of Layouts, got {}",
            type_name(object)
        )));
    };
    items
        .iter()
        .map(|item| {
            item.cast::<PyLayout>()
                .map(|layout| layout.get().inner.clone())
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{what} must hold Layouts, got {}",
                        type_name(item)
                    ))
                })
        })
        .collect()
}

/// The composition of two layouts: a `Layout` when one expresses it exactly, else this map.
#[pyclass(name = "Composition", module = "strideweave", frozen)]
pub struct PyComposition {
    inner: Composition,
}

fn composition_to_py(py: Python<'_>, composition: Composition) -> PyResult<Py<PyAny>> {
    match composition {
        Composition::Layout(layout) => Ok(Py::new(py, PyLayout { inner: layout })?.into_any()),
        map => Ok(Py::new(py, PyComposition { inner: map })?.into_any()),
    }
}

#[pymethods]
impl PyComposition {
    /// The number of ordinals in the domain.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// One more than the largest value the map produces.
    #[getter]
    fn codomain_size(&self) -> usize {
        self.inner.codomain_size()
    }

    /// The domain's shape as an integer tree.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        from_int_tuple(py, &self.inner.shape().to_int_tuple())
    }

    /// The value at a colexicographic `ordinal` of the domain.
    fn __call__(&self, ordinal: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ordinal = to_index(ordinal, "ordinal")?;
        self.inner.apply(ordinal).map_err(layout_err)
    }

    /// `self ∘ inner`.
    fn compose(&self, py: Python<'_>, inner: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let inner = if let Ok(layout) = inner.cast::<PyLayout>() {
            Composition::Layout(layout.get().inner.clone())
        } else if let Ok(map) = inner.cast::<PyComposition>() {
            map.get().inner.clone()
        } else {
            return Err(PyTypeError::new_err(format!(
                "compose needs a Layout or Composition, got {}",
                type_name(inner)
            )));
        };
        composition_to_py(py, self.inner.compose(&inner).map_err(layout_err)?)
    }

    fn __repr__(&self) -> String {
        match &self.inner {
            Composition::Layout(layout) => format!("Composition({layout})"),
            Composition::Map(map) => format!("Composition({map})"),
        }
    }
}

#[pymethods]
impl PyLayout {
    #[new]
    #[pyo3(signature = (shape, stride=None))]
    fn py_new(shape: &Bound<'_, PyAny>, stride: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        if let Ok(text) = shape.cast::<PyString>() {
            if stride.is_some() {
                return Err(PyTypeError::new_err(
                    "Layout(notation) takes no stride: the notation holds it",
                ));
            }
            let layout = text.to_cow()?.parse::<Layout>().map_err(layout_err)?;
            return Ok(PyLayout { inner: layout });
        }
        let shape = to_shape(&integer_tree(shape), "Layout shape")?;
        let inner = match stride {
            None => Layout::column_major(shape),
            Some(stride) => {
                let stride = Stride::new(to_int_tuple(&integer_tree(stride), "Layout stride")?)
                    .map_err(layout_err)?;
                Layout::new(shape, stride).map_err(layout_err)?
            }
        };
        Ok(PyLayout { inner })
    }

    /// The shape as an integer tree.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        from_int_tuple(py, &self.inner.shape().to_int_tuple())
    }

    /// The stride as an integer tree.
    #[getter]
    fn stride(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        from_int_tuple(py, &self.inner.stride().to_int_tuple())
    }

    /// The number of coordinates (the product of the extents).
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// One more than the largest index the layout produces.
    #[getter]
    fn cosize(&self) -> usize {
        self.inner.cosize()
    }

    /// The number of top-level modes.
    #[getter]
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// The nesting depth (a flat layout has depth 1).
    #[getter]
    fn depth(&self) -> usize {
        self.inner.depth()
    }

    /// Whether distinct coordinates reach distinct indices.
    #[getter]
    fn is_injective(&self) -> bool {
        self.inner.is_injective()
    }

    fn __len__(&self) -> usize {
        self.inner.rank()
    }

    /// Top-level mode `k` as a layout; a slice selects several modes as one layout.
    fn __getitem__(&self, k: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        if let Ok(slice) = k.cast::<pyo3::types::PySlice>() {
            return Ok(PyLayout {
                inner: crate::layout_helpers::slice_modes(&self.inner, slice)?,
            });
        }
        let k = to_index(k, "mode")?;
        Ok(PyLayout {
            inner: self.inner.mode(k).map_err(layout_err)?,
        })
    }

    /// The top-level modes, in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let modes = self
            .inner
            .modes()
            .into_iter()
            .map(|inner| Py::new(py, PyLayout { inner }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, modes)?.try_iter()?.into_any().unbind())
    }

    /// Layouts are immutable: a copy is the layout itself.
    fn __copy__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __deepcopy__(slf: Py<Self>, _memo: &Bound<'_, PyAny>) -> Py<Self> {
        slf
    }

    /// Whether the layout is one leaf (or empty): at most one mode, not nested.
    #[getter]
    fn is_leaf(&self) -> bool {
        crate::layout_helpers::is_leaf(&self.inner)
    }

    /// The `(extent, stride)` of each leaf, depth first.
    fn infix(&self) -> Vec<(usize, usize)> {
        crate::layout_helpers::infix(&self.inner)
    }

    /// How many coordinates reach each coordinate of `target_shape` (a `Shape` or an integer
    /// tree) when the layout provably maps onto it uniformly, else `None`.
    fn uniform_preimage_extent(&self, target_shape: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        let target = to_shape(
            &integer_tree(target_shape),
            "uniform_preimage_extent target_shape",
        )?;
        Ok(self.inner.uniform_preimage_extent(&target))
    }

    /// `Layout.leaf(extent, stride)`: the rank-1 layout `extent:stride`.
    #[staticmethod]
    fn leaf(extent: &Bound<'_, PyAny>, stride: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let extent = to_index(extent, "leaf extent")?;
        let stride = to_index(stride, "leaf stride")?;
        Ok(PyLayout {
            inner: crate::layout_helpers::leaf(extent, stride)?,
        })
    }

    /// `Layout.empty()`: the rank-0 layout.
    #[staticmethod]
    fn empty() -> PyLayout {
        PyLayout {
            inner: Layout::scalar(),
        }
    }

    /// `Layout.make_layout(*layouts)`: the layouts as modes of one (each appended).
    #[staticmethod]
    #[pyo3(signature = (*layouts))]
    fn make_layout(layouts: &Bound<'_, PyTuple>) -> PyResult<PyLayout> {
        let modes = layouts
            .iter()
            .map(|item| expect_layout(&item, "make_layout argument"))
            .collect::<PyResult<Vec<_>>>()?;
        let mut inner = Layout::scalar();
        for mode in &modes {
            inner = inner.append(mode).map_err(layout_err)?;
        }
        Ok(PyLayout { inner })
    }

    /// `Layout.get_index(layout, key)`: `layout.index(key)`.
    #[staticmethod]
    fn get_index(layout: &Bound<'_, PyAny>, key: &Bound<'_, PyAny>) -> PyResult<usize> {
        let layout = expect_layout(layout, "get_index layout")?;
        let coord = to_int_tuple(key, "coordinate")?;
        layout.index(&coord).map_err(layout_err)
    }

    /// `Layout.extract_profile(layout, profile=None)`: each leaf as a layout, depth first, or
    /// with a profile `Tree`, the part of the layout at each of its leaves.
    #[staticmethod]
    #[pyo3(signature = (layout, profile=None))]
    fn extract_profile(
        layout: &Bound<'_, PyAny>,
        profile: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyLayout>> {
        let layout = expect_layout(layout, "extract_profile layout")?;
        let profile = profile
            .map(|p| crate::layout_helpers::tree_arg(p, "extract_profile profile"))
            .transpose()?;
        Ok(
            crate::layout_helpers::extract_profile(&layout, profile.as_ref())?
                .into_iter()
                .map(PyLayout::new_from)
                .collect(),
        )
    }

    /// `Layout.flatten_layout(layout)`: `(flat, recipe)`, the leaves as one flat layout and
    /// the `Node` recipe of the nesting.
    #[staticmethod]
    fn flatten_layout(
        py: Python<'_>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<(PyLayout, Vec<Py<PyAny>>)> {
        let layout = expect_layout(layout, "flatten_layout layout")?;
        let (flat, recipe) = crate::layout_helpers::flatten(py, &layout)?;
        Ok((PyLayout::new_from(flat), recipe))
    }

    /// `Layout.rearrange(layout, output, selection=None)`: a new hierarchy of the parts the
    /// selection extracts (every leaf by default), placed by the `Node.id(k)` leaves of the
    /// output `Tree` (a plain leaf inserts `1:0`).
    #[staticmethod]
    #[pyo3(signature = (layout, output, selection=None))]
    fn rearrange(
        layout: &Bound<'_, PyAny>,
        output: &Bound<'_, PyAny>,
        selection: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyLayout> {
        let layout = expect_layout(layout, "rearrange layout")?;
        let output = crate::layout_helpers::tree_arg(output, "rearrange output")?;
        let selection = selection
            .map(|s| crate::layout_helpers::tree_arg(s, "rearrange selection"))
            .transpose()?;
        Ok(PyLayout {
            inner: layout
                .rearrange(&output, selection.as_ref())
                .map_err(layout_err)?,
        })
    }

    /// `Layout.reverse_rearrange(output, selection)`: the `(output, selection)` trees that
    /// undo a rearrange with these.
    #[staticmethod]
    fn reverse_rearrange(
        py: Python<'_>,
        output: &Bound<'_, PyAny>,
        selection: &Bound<'_, PyAny>,
    ) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        let output = crate::layout_helpers::tree_arg(output, "reverse_rearrange output")?;
        let selection = crate::layout_helpers::tree_arg(selection, "reverse_rearrange selection")?;
        let (back_output, back_selection) =
            strideweave::layout::Tree::reverse_rearrange(&output, &selection)
                .map_err(layout_err)?;
        Ok((
            crate::layout_helpers::py_tree(py, &back_output)?,
            crate::layout_helpers::py_tree(py, &back_selection)?,
        ))
    }

    /// `Layout.coalesce_by_mode(layout, profile)`: each part the profile `Tree` extracts,
    /// coalesced, in the profile's structure.
    #[staticmethod]
    fn coalesce_by_mode(
        layout: &Bound<'_, PyAny>,
        profile: &Bound<'_, PyAny>,
    ) -> PyResult<PyLayout> {
        let layout = expect_layout(layout, "coalesce_by_mode layout")?;
        let profile = crate::layout_helpers::tree_arg(profile, "coalesce_by_mode profile")?;
        Ok(PyLayout {
            inner: crate::layout_helpers::coalesce_by_mode(&layout, &profile)?,
        })
    }

    /// `Layout.choose(layout, d)`: the layout of every `d`-th element (leaf modes only).
    #[staticmethod]
    fn choose(layout: &Bound<'_, PyAny>, d: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let layout = expect_layout(layout, "choose layout")?;
        let d = to_index(d, "choose d")?;
        Ok(PyLayout {
            inner: crate::layout_helpers::choose(&layout, d)?,
        })
    }

    /// `Layout.modout(layout, s)`: the extents cut to cover `s` elements (leaf modes only).
    #[staticmethod]
    fn modout(layout: &Bound<'_, PyAny>, s: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let layout = expect_layout(layout, "modout layout")?;
        let s = to_index(s, "modout s")?;
        Ok(PyLayout {
            inner: crate::layout_helpers::modout(&layout, s)?,
        })
    }

    /// The index of a coordinate: an int (a colexicographic ordinal) or a tuple whose
    /// entries may each be an ordinal standing for a whole subtree.
    fn __call__(&self, coord: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.index(coord)
    }

    /// The index of a coordinate (see `__call__`).
    fn index(&self, coord: &Bound<'_, PyAny>) -> PyResult<usize> {
        let coord = to_int_tuple(coord, "coordinate")?;
        self.inner.index(&coord).map_err(layout_err)
    }

    /// `self ∘ inner` for a Layout inner (a `Layout` where exact, else a `Composition`),
    /// a shape given as an integer tuple, or a tiler (a list of Layouts, one per mode).
    fn compose(&self, py: Python<'_>, inner: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(layout) = inner.cast::<PyLayout>() {
            return composition_to_py(
                py,
                self.inner
                    .compose(&layout.get().inner)
                    .map_err(layout_err)?,
            );
        }
        let tuple_of_layouts = inner.cast::<PyTuple>().is_ok_and(|t| {
            t.get_item(0)
                .is_ok_and(|first| first.cast::<PyLayout>().is_ok())
        });
        if inner.cast::<PyList>().is_ok() || tuple_of_layouts {
            let tiles = to_tiler(inner, "compose tiler")?;
            return Ok(Py::new(
                py,
                PyLayout {
                    inner: self.inner.compose_tiler(&tiles).map_err(layout_err)?,
                },
            )?
            .into_any());
        }
        let shape_value = !inner.is_instance_of::<PyTuple>() && inner.hasattr("top_level")?;
        if inner.cast::<PyTuple>().is_ok()
            || inner.is_instance_of::<pyo3::types::PyInt>()
            || shape_value
        {
            let shape = to_shape(&integer_tree(inner), "compose shape")?;
            return Ok(Py::new(
                py,
                PyLayout {
                    inner: self.inner.compose_shape(&shape).map_err(layout_err)?,
                },
            )?
            .into_any());
        }
        Err(PyTypeError::new_err(format!(
            "compose needs a Layout, a shape tuple or a list of Layouts, got {}",
            type_name(inner)
        )))
    }

    /// The layout that fills the gaps of `self` up to `cotarget` indices.
    fn complement(&self, cotarget: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let cotarget = to_index(cotarget, "cotarget")?;
        Ok(PyLayout {
            inner: self.inner.complement(cotarget).map_err(layout_err)?,
        })
    }

    /// Logical division by `tile`: `(tile, rest)`.
    fn divide(&self, tile: PyRef<'_, PyLayout>) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: self.inner.divide(&tile.inner).map_err(layout_err)?,
        })
    }

    /// Division of each leading mode by its own tile.
    fn divide_tiler(&self, tiles: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let tiles = to_tiler(tiles, "divide_tiler tiles")?;
        Ok(PyLayout {
            inner: self.inner.divide_tiler(&tiles).map_err(layout_err)?,
        })
    }

    /// Division gathered as `((tiles), (rests), trailing)`.
    fn zipped_divide(&self, tiles: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let tiles = to_tiler(tiles, "zipped_divide tiles")?;
        Ok(PyLayout {
            inner: self.inner.zipped_divide(&tiles).map_err(layout_err)?,
        })
    }

    /// CuTe's logical product: `self` repeated over the layout of `other`.
    fn logical_product(&self, other: PyRef<'_, PyLayout>) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: self
                .inner
                .logical_product(&other.inner)
                .map_err(layout_err)?,
        })
    }

    /// CuTe's blocked product.
    fn blocked_product(&self, other: PyRef<'_, PyLayout>) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: self
                .inner
                .blocked_product(&other.inner)
                .map_err(layout_err)?,
        })
    }

    /// The right inverse: `self(right_inverse(i)) == i` on its domain.
    fn right_inverse(&self) -> PyLayout {
        PyLayout {
            inner: self.inner.right_inverse(),
        }
    }

    /// The left inverse of an injective layout.
    fn left_inverse(&self) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: self.inner.left_inverse().map_err(layout_err)?,
        })
    }

    /// The same map with unit modes dropped and contiguous neighbours merged.
    fn coalesce(&self) -> PyLayout {
        PyLayout {
            inner: self.inner.coalesce(),
        }
    }

    /// The layout with stride-0 and extent-1 leaves removed.
    fn filter(&self) -> PyLayout {
        PyLayout {
            inner: self.inner.filter(),
        }
    }

    /// Joins the top-level modes of both layouts (also `self + other`).
    fn concat(&self, other: PyRef<'_, PyLayout>) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: self.inner.concat(&other.inner).map_err(layout_err)?,
        })
    }

    fn __add__(&self, other: PyRef<'_, PyLayout>) -> PyResult<PyLayout> {
        self.concat(other)
    }

    /// Nests `other` as one more mode.
    fn append(&self, other: PyRef<'_, PyLayout>) -> PyResult<PyLayout> {
        Ok(PyLayout {
            inner: self.inner.append(&other.inner).map_err(layout_err)?,
        })
    }

    /// The modes reordered: `order[j]` is the mode placed at `j`.
    #[pyo3(signature = (*order))]
    fn permute(&self, order: &Bound<'_, PyTuple>) -> PyResult<PyLayout> {
        let order = crate::layout_helpers::permute_order(order)?;
        Ok(PyLayout {
            inner: self.inner.permute(&order).map_err(layout_err)?,
        })
    }

    /// The layout widened to `shape`: extent-1 leaves broadcast with stride 0.
    fn broadcast_to(&self, shape: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let shape = to_shape(shape, "broadcast_to shape")?;
        Ok(PyLayout {
            inner: self.inner.broadcast_to(&shape).map_err(layout_err)?,
        })
    }

    /// Every index, in colexicographic coordinate order.
    fn indices(&self) -> PyResult<Vec<usize>> {
        crate::convert::check_python_list(self.inner.size(), || {
            format!("the indices of Layout('{}')", self.inner)
        })?;
        (0..self.inner.size())
            .map(|ordinal| self.inner.index_of(ordinal).map_err(layout_err))
            .collect()
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.inner.to_string().hash(&mut hasher);
        hasher.finish()
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Layout('{}')", self.inner)
    }
}

/// The integer tree of a shape or stride argument: the package's `Shape` and `Stride` values
/// hold theirs as `top_level`; anything else is taken as it is.
pub(crate) fn integer_tree<'py>(value: &Bound<'py, PyAny>) -> Bound<'py, PyAny> {
    match value.getattr("top_level") {
        Ok(tree) if !value.is_instance_of::<pyo3::types::PyTuple>() => tree,
        _ => value.clone(),
    }
}

/// Refuses a layout argument that is not a `Layout`, naming `what`.
pub fn expect_layout(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Layout> {
    object
        .cast::<PyLayout>()
        .map(|layout| layout.get().inner.clone())
        .map_err(|_| {
            PyValueError::new_err(format!(
                "{what} must be a Layout, got {}",
                type_name(object)
            ))
        })
}
