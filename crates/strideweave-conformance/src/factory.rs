//! [`CarrierFactory`]: how the suite obtains carriers of the class under test.

use std::collections::HashMap;
use std::sync::Arc;

use strideweave::operation::{Accuracy, Builtin};
use strideweave::{Carrier, CarrierClass, DType, Layout, Result, Tensor, Value};

use crate::custom::OperationCase;
use crate::facets::FacetProbe;
use crate::faults::FaultHook;

/// The carrier class under test, as the suite sees it: a source of fresh carriers plus
/// optional hooks for fault injection and tolerances.
///
/// The suite builds every operand, cotangent and move destination it needs through
/// [`carrier`](CarrierFactory::carrier), so a class with configuration (tiers, a device, a
/// tile grid) keeps it; factories (`new_like`, `allocate_like`) are tested separately.
pub trait CarrierFactory {
    /// The name reports and failure messages use for the class under test.
    fn name(&self) -> &str;

    /// A fresh, live, mutable carrier of the class under test with `dtype` storage holding
    /// `values` (already normalized to `dtype`; possibly none). The suite asks only for
    /// dtypes the carrier reports storable (`supports_storage_dtype`) and first asks for
    /// Float32; an error for another dtype means the class does not store it.
    fn carrier(&self, dtype: DType, values: &[Value]) -> Result<Carrier>;

    /// A tensor of the class under test whose elements are the elements of `layout` at
    /// `offset` over the slot `values`: by default `Tensor::new(carrier(dtype, values),
    /// offset, layout)`. A class whose tensors must cover their carrier one to one (a
    /// TiledEvictable's operands cover its logical shape) overrides it to build a carrier
    /// of its own layout holding the same elements; the suite compares elements, never
    /// slots, so that is still a fair comparison with the reference.
    fn tensor(
        &self,
        dtype: DType,
        values: &[Value],
        offset: usize,
        layout: Layout,
    ) -> Result<Tensor> {
        Tensor::new(self.carrier(dtype, values)?, offset, layout)
    }

    /// The fewest slots a carrier of the class can have (default 0). A class that cannot
    /// be empty (an Evictable's primary tier must hold something) declares 1; the suite
    /// then skips the empty sizes and says so in its notes.
    fn min_slots(&self) -> usize {
        0
    }

    /// Whether the class's factories keep the prototype's extent (default false). A class
    /// whose extent is part of its configuration (a TiledEvictable's grid) declares true:
    /// the suite then asks `new_like` and `allocate_like` for the prototype's own size, and
    /// checks that another size is refused with a Value error rather than built wrong.
    fn fixed_extent_factories(&self) -> bool {
        false
    }

    /// The fault points the class's own callbacks consult, when they do: the suite arms
    /// each of them in turn and checks that the failure publishes nothing. `None` (the
    /// default) leaves only the failures the suite can provoke without the carrier's help
    /// (an overflowing checked Int32 kernel, a failing move endpoint), and the report says so.
    fn faults(&self) -> Option<&dyn FaultHook> {
        None
    }

    /// The calls of custom operations the suite can make (see [`OperationCase`]); default
    /// none. Every advertised custom operation needs one whose call resolves to its plan.
    fn operation_cases(&self) -> Vec<OperationCase> {
        Vec::new()
    }

    /// The names of other carrier classes a tensor of the class moves to, beyond the CPU
    /// (a staging class's device, an accelerator's host buffers); default none. The suite
    /// moves values to each (they must arrive, the source released) and, with fault points,
    /// fails those moves too.
    fn destinations(&self) -> Vec<String> {
        Vec::new()
    }

    /// A fresh carrier of the destination `name` (one of
    /// [`destinations`](CarrierFactory::destinations)) with `slots` slots of `dtype`.
    fn destination(&self, name: &str, dtype: DType, slots: usize) -> Result<Carrier> {
        let _ = (dtype, slots);
        Err(strideweave::Error::NotImplemented(format!(
            "the factory names no move destination '{name}'"
        )))
    }

    /// The absolute and relative tolerance for values of `operation` (see
    /// [`default_tolerance`]); override it for a device whose arithmetic is documented as
    /// less exact than the reference's.
    fn tolerance(&self, operation: &str) -> (f64, f64) {
        default_tolerance(operation)
    }

    /// The facet types the class's definition registers (see [`FacetProbe`]); default none.
    /// The suite finds each by its exact type on every carrier of the class.
    fn facets(&self) -> Vec<FacetProbe> {
        Vec::new()
    }

    /// A TiledEvictable of the class's configuration (its tier classes and policy) with
    /// `grid` tiles of `tile` each, holding `values` colexicographically over its logical
    /// shape `grid · tile`, for a class whose tensors are TiledEvictable tensors; default
    /// `None`. With it the suite projects and scatters grids of one, two and three axes;
    /// without it only the one-axis grid of the factory's own 6-element tensor.
    fn tiled(
        &self,
        dtype: DType,
        values: &[Value],
        grid: &[usize],
        tile: &[usize],
    ) -> Option<Result<Carrier>> {
        let _ = (dtype, values, grid, tile);
        None
    }

    /// A fresh class of the kind under test that nothing has constructed or queried yet,
    /// with a factory of its carriers; default `None`. Kernel packs attach only before a
    /// class is observed, so the suite registers its packs on this class.
    fn fresh_class(&self) -> Option<Result<(CarrierClass, Factory)>> {
        None
    }
}

/// The tolerance the suite compares a value of `operation` with against the Generic
/// reference, by the accuracy of its entry in the table of built-ins: exact for the
/// correctly rounded operations (arithmetic, comparisons, `select`, extrema), `(1e-6, 1e-5)`
/// for the transcendental ones and `div` (and for custom operations), and `(1e-5, 1e-5)`
/// scaled by the size of the contraction for `reduce_sum` and `matmul`, whose summation
/// order is the carrier's business.
pub fn default_tolerance(operation: &str) -> (f64, f64) {
    match Builtin::from_name(operation).map(Builtin::accuracy) {
        Some(Accuracy::Exact) => (0.0, 0.0),
        Some(Accuracy::OrderDependent) => (1e-5, 1e-5),
        _ => (1e-6, 1e-5),
    }
}

type MakeFn = dyn Fn(DType, &[Value]) -> Result<Carrier> + Send + Sync;
type TensorFn = dyn Fn(DType, &[Value], usize, Layout) -> Result<Tensor> + Send + Sync;
type DestinationFn = dyn Fn(DType, usize) -> Result<Carrier> + Send + Sync;
type TilingFn = dyn Fn(DType, &[Value], &[usize], &[usize]) -> Result<Carrier> + Send + Sync;
type DefinedFn = dyn Fn(CarrierClass, DType, &[Value]) -> Result<Carrier> + Send + Sync;
type FreshFn = dyn Fn() -> Result<(CarrierClass, Factory)> + Send + Sync;

/// A [`CarrierFactory`] built from a closure: `Factory::new("Ring", |dtype, values| ...)`.
#[derive(Clone)]
pub struct Factory {
    name: String,
    make: Arc<MakeFn>,
    tensor: Option<Arc<TensorFn>>,
    min_slots: usize,
    fixed_extent_factories: bool,
    faults: Option<Arc<dyn FaultHook>>,
    tolerances: HashMap<String, (f64, f64)>,
    destinations: Vec<(String, Arc<DestinationFn>)>,
    cases: Vec<OperationCase>,
    facets: Vec<FacetProbe>,
    fresh: Option<Arc<FreshFn>>,
    tiling: Option<Arc<TilingFn>>,
}

impl Factory {
    /// A factory named `name` whose carriers `make(dtype, values)` builds.
    pub fn new(
        name: impl Into<String>,
        make: impl Fn(DType, &[Value]) -> Result<Carrier> + Send + Sync + 'static,
    ) -> Factory {
        Factory {
            name: name.into(),
            make: Arc::new(make),
            tensor: None,
            min_slots: 0,
            fixed_extent_factories: false,
            faults: None,
            tolerances: HashMap::new(),
            destinations: Vec::new(),
            cases: Vec::new(),
            facets: Vec::new(),
            fresh: None,
            tiling: None,
        }
    }

    /// A factory of a definition-backed class that `define` mints and registers (returning
    /// the fresh class, constructing and querying nothing), whose carriers `make(class,
    /// dtype, values)` builds: the factory's own class is defined now, and every check that
    /// needs a class nothing has observed (kernel packs) defines another with `define`.
    ///
    /// # Errors
    /// The error of the first `define`.
    pub fn defined(
        name: impl Into<String>,
        define: impl Fn() -> Result<CarrierClass> + Send + Sync + 'static,
        make: impl Fn(CarrierClass, DType, &[Value]) -> Result<Carrier> + Send + Sync + 'static,
    ) -> Result<Factory> {
        let name = name.into();
        let make: Arc<DefinedFn> = Arc::new(make);
        let over = |class: CarrierClass, name: String, make: &Arc<DefinedFn>| {
            let make = Arc::clone(make);
            Factory::new(name, move |dtype, values| make(class, dtype, values))
        };
        let class = define()?;
        let fresh_name = format!("{name} (fresh)");
        let fresh_make = Arc::clone(&make);
        Ok(over(class, name, &make).with_fresh_class(move || {
            let class = define()?;
            Ok((class, over(class, fresh_name.clone(), &fresh_make)))
        }))
    }

    /// This factory declaring that its class's definition registers the facet type `F`
    /// (see [`CarrierFactory::facets`]).
    pub fn with_facet<F: strideweave::carriers::extension::CarrierFacet>(mut self) -> Factory {
        self.facets.push(FacetProbe::of::<F>());
        self
    }

    /// This factory with `define`, which defines a fresh class of the kind under test and
    /// returns it with a factory of its carriers, constructing and querying nothing (see
    /// [`CarrierFactory::fresh_class`]).
    pub fn with_fresh_class(
        mut self,
        define: impl Fn() -> Result<(CarrierClass, Factory)> + Send + Sync + 'static,
    ) -> Factory {
        self.fresh = Some(Arc::new(define));
        self
    }

    /// This factory building TiledEvictables of any geometry with `tiling(dtype, values,
    /// grid, tile)` (see [`CarrierFactory::tiled`]).
    pub fn with_tiling(
        mut self,
        tiling: impl Fn(DType, &[Value], &[usize], &[usize]) -> Result<Carrier> + Send + Sync + 'static,
    ) -> Factory {
        self.tiling = Some(Arc::new(tiling));
        self
    }

    /// This factory building operand tensors with `tensor` (see
    /// [`CarrierFactory::tensor`]).
    pub fn with_tensors(
        mut self,
        tensor: impl Fn(DType, &[Value], usize, Layout) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Factory {
        self.tensor = Some(Arc::new(tensor));
        self
    }

    /// This factory declaring that its carriers hold at least `slots` slots (see
    /// [`CarrierFactory::min_slots`]).
    pub fn with_min_slots(mut self, slots: usize) -> Factory {
        self.min_slots = slots;
        self
    }

    /// This factory declaring that its class's factories keep the prototype's extent (see
    /// [`CarrierFactory::fixed_extent_factories`]).
    pub fn with_fixed_extent_factories(mut self) -> Factory {
        self.fixed_extent_factories = true;
        self
    }

    /// This factory with `faults`, the fault points its carriers' callbacks consult (a
    /// [`FaultInjector`](crate::FaultInjector), or a bridge to the carrier's own mechanism).
    pub fn with_faults(mut self, faults: impl FaultHook + 'static) -> Factory {
        self.faults = Some(Arc::new(faults));
        self
    }

    /// This factory declaring `case`, a call of a custom operation its class advertises
    /// (see [`CarrierFactory::operation_cases`]).
    pub fn with_operation_case(mut self, case: OperationCase) -> Factory {
        self.cases.push(case);
        self
    }

    /// This factory naming the move destination `name`, whose carriers `make(dtype, slots)`
    /// builds (see [`CarrierFactory::destinations`]).
    pub fn with_destination(
        mut self,
        name: impl Into<String>,
        make: impl Fn(DType, usize) -> Result<Carrier> + Send + Sync + 'static,
    ) -> Factory {
        self.destinations.push((name.into(), Arc::new(make)));
        self
    }

    /// This factory comparing `operation` with the absolute tolerance `atol` and the
    /// relative tolerance `rtol` instead of [`default_tolerance`].
    pub fn with_tolerance(mut self, operation: &str, atol: f64, rtol: f64) -> Factory {
        self.tolerances.insert(operation.to_string(), (atol, rtol));
        self
    }
}

impl CarrierFactory for Factory {
    fn name(&self) -> &str {
        &self.name
    }

    fn carrier(&self, dtype: DType, values: &[Value]) -> Result<Carrier> {
        (self.make)(dtype, values)
    }

    fn tensor(
        &self,
        dtype: DType,
        values: &[Value],
        offset: usize,
        layout: Layout,
    ) -> Result<Tensor> {
        match &self.tensor {
            Some(tensor) => tensor(dtype, values, offset, layout),
            None => Tensor::new(self.carrier(dtype, values)?, offset, layout),
        }
    }

    fn min_slots(&self) -> usize {
        self.min_slots
    }

    fn fixed_extent_factories(&self) -> bool {
        self.fixed_extent_factories
    }

    fn faults(&self) -> Option<&dyn FaultHook> {
        self.faults.as_deref()
    }

    fn operation_cases(&self) -> Vec<OperationCase> {
        self.cases.clone()
    }

    fn destinations(&self) -> Vec<String> {
        self.destinations.iter().map(|(n, _)| n.clone()).collect()
    }

    fn destination(&self, name: &str, dtype: DType, slots: usize) -> Result<Carrier> {
        match self.destinations.iter().find(|(n, _)| n == name) {
            Some((_, make)) => make(dtype, slots),
            None => Err(strideweave::Error::NotImplemented(format!(
                "the factory names no move destination '{name}'"
            ))),
        }
    }

    fn tolerance(&self, operation: &str) -> (f64, f64) {
        self.tolerances
            .get(operation)
            .copied()
            .unwrap_or_else(|| default_tolerance(operation))
    }

    fn facets(&self) -> Vec<FacetProbe> {
        self.facets.clone()
    }

    fn fresh_class(&self) -> Option<Result<(CarrierClass, Factory)>> {
        self.fresh.as_ref().map(|define| define())
    }

    fn tiled(
        &self,
        dtype: DType,
        values: &[Value],
        grid: &[usize],
        tile: &[usize],
    ) -> Option<Result<Carrier>> {
        self.tiling
            .as_ref()
            .map(|tiling| tiling(dtype, values, grid, tile))
    }
}
