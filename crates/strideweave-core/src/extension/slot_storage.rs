//! `SlotStorage`: the storage surface as a trait with named methods, an alternative to the
//! six positional closures of [`StorageProvider::new`].

use crate::dtype::{DType, Value};
use crate::error::Result;
use crate::extension::StorageProvider;

/// A definition-backed carrier's provider-owned state, with the seed's storage callbacks as
/// named methods. [`StorageProvider::from_slots`] turns an implementation into the same
/// [`StorageProvider`] the closures build, so the framework's checks, guards and records are
/// unchanged: it checks exact class, liveness, mutability, extent and index before each
/// method, normalizes written values to the carrier's dtype, and turns a panic into an error.
///
/// Seed rule: "StorageProvider(supports_dtype, physical_size, allocate, release, read,
/// write, elementwise_fallback=False) SHALL store six required callbacks"; this trait names
/// them. A factory's fresh state is `Self::default()`.
///
/// ```
/// use strideweave::carriers::extension::SlotStorage;
/// use strideweave::{DType, Result, StorageProvider, Value};
///
/// #[derive(Default)]
/// struct Bits(Vec<bool>);
///
/// impl SlotStorage for Bits {
///     fn supports_dtype(&self, dtype: DType) -> bool { dtype == DType::BOOL }
///     fn physical_size(&self) -> usize { self.0.len() }
///     fn allocate(&mut self, slots: usize, _: DType) -> Result<()> {
///         self.0 = vec![false; slots];
///         Ok(())
///     }
///     fn read(&self, index: usize) -> Result<Value> { Ok(Value::Bool(self.0[index])) }
///     fn write(&mut self, index: usize, value: Value) -> Result<()> {
///         self.0[index] = value.as_bool().unwrap_or(false);
///         Ok(())
///     }
/// }
///
/// let storage = StorageProvider::from_slots::<Bits>();
/// assert!(storage.state_type_name().ends_with("Bits"));
/// ```
pub trait SlotStorage: Default + Send + Sync + 'static {
    /// Whether the class stores `dtype`, compared by identity; the answer must not depend on
    /// the state (size, contents, release).
    fn supports_dtype(&self, dtype: DType) -> bool;

    /// The number of slots the state holds.
    fn physical_size(&self) -> usize;

    /// Establishes exactly `slots` slots for a carrier of `dtype`.
    fn allocate(&mut self, slots: usize, dtype: DType) -> Result<()>;

    /// Relinquishes the storage; called at most once. By default the state is replaced by
    /// `Self::default()`, which drops what it held.
    fn release(&mut self) -> Result<()> {
        *self = Self::default();
        Ok(())
    }

    /// The value at an in-range slot, in a form the carrier's dtype accepts.
    fn read(&self, index: usize) -> Result<Value>;

    /// Stores an already normalized value at an in-range slot.
    fn write(&mut self, index: usize, value: Value) -> Result<()>;
}

impl StorageProvider {
    /// The storage provider of the [`SlotStorage`] state `S` (elementwise fallback off; see
    /// [`with_elementwise_fallback`](StorageProvider::with_elementwise_fallback)).
    pub fn from_slots<S: SlotStorage>() -> StorageProvider {
        StorageProvider::new(
            |state: &S, dtype| state.supports_dtype(dtype),
            |state: &S| i64::try_from(state.physical_size()).unwrap_or(i64::MAX),
            |state: &mut S, slots, dtype| state.allocate(slots, dtype),
            |state: &mut S| state.release(),
            |state: &S, index| state.read(index),
            |state: &mut S, index, value| state.write(index, value),
        )
    }
}
