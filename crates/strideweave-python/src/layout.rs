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

    /// Top-level mode `k` as a layout.
    fn __getitem__(&self, k: &Bound<'_, PyAny>) -> PyResult<PyLayout> {
        let k = to_index(k, "mode")?;
        Ok(PyLayout {
            inner: self.inner.mode(k).map_err(layout_err)?,
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
        if let Ok(list) = inner.cast::<PyList>() {
            let tiles = to_tiler(list.as_any(), "compose tiler")?;
            return Ok(Py::new(
                py,
                PyLayout {
                    inner: self.inner.compose_tiler(&tiles).map_err(layout_err)?,
                },
            )?
            .into_any());
        }
        if inner.cast::<PyTuple>().is_ok() || inner.is_instance_of::<pyo3::types::PyInt>() {
            let shape = to_shape(inner, "compose shape")?;
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
        let order = order
            .iter()
            .map(|item| to_index(&item, "permute order"))
            .collect::<PyResult<Vec<_>>>()?;
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
fn integer_tree<'py>(value: &Bound<'py, PyAny>) -> Bound<'py, PyAny> {
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
