//! [`MpiHost`]: the host-memory carrier class the collectives run on, and its routes to and
//! from the CPU.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use strideweave::carrier::DefinitionFreeCarrier;
use strideweave::carriers::extension::read_f32s;
use strideweave::movement::{MoveOperation, MoveTarget};
use strideweave::operation::Operation;
use strideweave::{Carrier, DType, Error, Result, Shape, Tensor, Value};

/// Float32 slots in this process's memory, in one contiguous buffer that MPI reads and
/// writes directly: the carrier class of the all-reduce operation (`mpi.all_reduce`).
///
/// It is a definition-free class (docs/carriers.md, Writing a definition-free carrier)
/// because the all-reduce must be differentiable from CPU tensors: a move from the CPU into a
/// definition-backed class has no route (docs/extension-design.md, "CPU → custom moves"),
/// while a definition-free class registers both routes, CPU → MpiHost and MpiHost → CPU,
/// and every recorded move needs the route back for its gradient. Both routes copy in bulk.
///
/// Empty carriers grow as move destinations; only Float32 is stored. The buffers of released
/// or dropped carriers of at least [`POOLED_MIN`] slots are kept for reuse by later
/// all-reduce results of the same length (at most [`POOLED_BUFFERS`] buffers and
/// [`POOLED_BYTES`] bytes), as a caching allocator does: a fresh buffer's pages would
/// otherwise be faulted in while MPI writes the result.
pub struct MpiHost {
    slots: RwLock<Vec<f32>>,
    /// Set when the carrier was grown for a move and not written since: the move may then
    /// replace the whole buffer, since nobody can read the old (zero) contents.
    grown: AtomicBool,
}

/// The fewest slots a buffer needs to be kept for reuse: 1 Mi (4 MiB).
pub const POOLED_MIN: usize = 1 << 20;
/// The most buffers kept for reuse.
pub const POOLED_BUFFERS: usize = 4;
/// The most bytes kept for reuse: 1 GiB.
pub const POOLED_BYTES: usize = 1 << 30;

/// Buffers of released carriers, most recent last.
static POOL: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// A kept buffer of exactly `len` slots (with stale contents), if there is one.
pub(crate) fn recycled(len: usize) -> Option<Vec<f32>> {
    if len < POOLED_MIN {
        return None;
    }
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    let index = pool.iter().rposition(|b| b.len() == len)?;
    Some(pool.swap_remove(index))
}

/// Keeps `buffer` for reuse when it is large enough, dropping the oldest kept buffers past
/// the limits.
fn give_back(buffer: Vec<f32>) {
    if buffer.len() < POOLED_MIN || buffer.len() * 4 > POOLED_BYTES {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    pool.push(buffer);
    while pool.len() > POOLED_BUFFERS
        || pool.iter().map(|b| b.len() * 4).sum::<usize>() > POOLED_BYTES
    {
        pool.remove(0);
    }
}

impl Drop for MpiHost {
    fn drop(&mut self) {
        let slots = self.slots.get_mut().unwrap_or_else(PoisonError::into_inner);
        give_back(std::mem::take(slots));
    }
}

impl std::fmt::Debug for MpiHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiHost")
            .field("slots", &self.read().len())
            .finish()
    }
}

impl MpiHost {
    fn with(values: Vec<f32>) -> MpiHost {
        MpiHost {
            slots: RwLock::new(values),
            grown: AtomicBool::new(false),
        }
    }

    /// A mutable carrier holding `values`.
    ///
    /// # Errors
    /// The errors of registering this crate's operation and routes (once per process).
    pub fn carrier(values: &[f32]) -> Result<Carrier> {
        MpiHost::from_vec(values.to_vec())
    }

    /// A mutable carrier with no slots, which grows when it is a move's destination.
    ///
    /// # Errors
    /// As [`carrier`](MpiHost::carrier).
    pub fn empty() -> Result<Carrier> {
        MpiHost::from_vec(Vec::new())
    }

    /// A compact (column-major) tensor of `shape` on a fresh carrier holding `values` in
    /// colexicographic order.
    ///
    /// # Errors
    /// Value when the number of values is not the shape's size; as
    /// [`carrier`](MpiHost::carrier).
    pub fn tensor(values: &[f32], shape: Shape) -> Result<Tensor> {
        if values.len() != shape.size() {
            return Err(Error::Value(format!(
                "{} values for an MpiHost tensor of Shape {shape} ({} elements)",
                values.len(),
                shape.size()
            )));
        }
        Tensor::compact(MpiHost::carrier(values)?, shape)
    }

    /// A mutable carrier that takes `values` as its buffer.
    pub(crate) fn from_vec(values: Vec<f32>) -> Result<Carrier> {
        crate::registration::setup()?;
        Carrier::new(MpiHost::with(values), DType::FLOAT32, true)
    }

    /// The buffer, for reading.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Vec<f32>> {
        self.slots.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, Vec<f32>> {
        self.slots.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A slot value as the `f32` it stores.
fn as_f32(value: Value) -> Result<f32> {
    match value {
        Value::Float(x) => Ok(x as f32),
        other => Err(Error::Type(format!(
            "MpiHost stores Float32 values, got {} {other}",
            other.type_name()
        ))),
    }
}

impl DefinitionFreeCarrier for MpiHost {
    const NAME: &'static str = "MpiHost";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }

    fn size(&self) -> usize {
        self.read().len()
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let slots = self.read();
        slots
            .get(index)
            .map(|x| Value::Float(f64::from(*x)))
            .ok_or_else(|| out_of_range(index, slots.len()))
    }

    fn read_all(&self, indices: &[usize], _dtype: DType) -> Result<Vec<Value>> {
        let slots = self.read();
        indices
            .iter()
            .map(|&i| {
                slots
                    .get(i)
                    .map(|x| Value::Float(f64::from(*x)))
                    .ok_or_else(|| out_of_range(i, slots.len()))
            })
            .collect()
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        let value = as_f32(value)?;
        let mut slots = self.write_lock();
        let size = slots.len();
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| out_of_range(index, size))?;
        *slot = value;
        self.grown.store(false, Ordering::Release);
        Ok(())
    }

    fn write_all(&self, writes: &[(usize, Value)], _dtype: DType) -> Result<()> {
        let converted: Vec<(usize, f32)> = writes
            .iter()
            .map(|&(i, v)| Ok((i, as_f32(v)?)))
            .collect::<Result<_>>()?;
        let mut slots = self.write_lock();
        if let Some(&(i, _)) = converted.iter().find(|(i, _)| *i >= slots.len()) {
            return Err(out_of_range(i, slots.len()));
        }
        for (i, v) in converted {
            slots[i] = v;
        }
        self.grown.store(false, Ordering::Release);
        Ok(())
    }

    fn release(&self) -> Result<()> {
        give_back(std::mem::take(&mut *self.write_lock()));
        Ok(())
    }

    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        let values = values.iter().map(|&v| as_f32(v)).collect::<Result<_>>()?;
        Ok(MpiHost::with(values))
    }

    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(MpiHost::with(zeros(size)?))
    }

    fn grows_as_destination(&self) -> bool {
        true
    }

    fn set_extent(&self, slots: usize, _dtype: DType) -> Result<()> {
        *self.write_lock() = zeros(slots)?;
        self.grown.store(true, Ordering::Release);
        Ok(())
    }

    fn supports_scatter(&self) -> bool {
        false
    }

    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        if name == crate::all_reduce::OPERATION {
            Ok(Operation::new(crate::all_reduce::forward))
        } else {
            Err(Error::NotImplemented(format!(
                "MpiHost carriers dispatch only '{}', not '{name}'",
                crate::all_reduce::OPERATION
            )))
        }
    }
}

/// `size` zeroed slots (the pages are only touched when written), or a Memory error.
fn zeros(size: usize) -> Result<Vec<f32>> {
    let mut values = Vec::new();
    values.try_reserve_exact(size).map_err(|_| {
        Error::Memory(format!(
            "cannot allocate {size} Float32 slots for an MpiHost carrier"
        ))
    })?;
    values.resize(size, 0.0);
    Ok(values)
}

fn out_of_range(index: usize, size: usize) -> Error {
    Error::Index(format!(
        "slot {index} of an MpiHost carrier of {size} slots"
    ))
}

/// The route CPU → MpiHost: one bulk read of the source span.
pub(crate) struct CpuToHost;

impl MoveOperation for CpuToHost {
    fn name(&self) -> &str {
        "strideweave-mpi CPU → MpiHost bulk copy"
    }

    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let values = read_f32s(source.carrier(), source.offset(), element_count)?;
        let host = target.carrier().downcast_ref::<MpiHost>().ok_or_else(|| {
            Error::Type("the CPU → MpiHost route needs an MpiHost destination".into())
        })?;
        // A destination grown for this move holds only zeros nobody can read: take the new
        // buffer whole. Otherwise write through the target, which can undo the writes.
        if host.grown.swap(false, Ordering::AcqRel) {
            let mut slots = host.write_lock();
            if slots.len() == element_count {
                *slots = values;
                return Ok(());
            }
        }
        target.write_f32s(0, &values)
    }
}

/// The route MpiHost → CPU: one bulk write into the destination.
pub(crate) struct HostToCpu;

impl MoveOperation for HostToCpu {
    fn name(&self) -> &str {
        "strideweave-mpi MpiHost → CPU bulk copy"
    }

    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let host = source
            .carrier()
            .downcast_ref::<MpiHost>()
            .ok_or_else(|| Error::Type("the MpiHost → CPU route needs an MpiHost source".into()))?;
        let slots = host.read();
        let span = source
            .offset()
            .checked_add(element_count)
            .and_then(|end| slots.get(source.offset()..end))
            .ok_or_else(|| {
                Error::Index(format!(
                    "slots {}..{} of an MpiHost carrier of {} slots",
                    source.offset(),
                    source.offset().saturating_add(element_count),
                    slots.len()
                ))
            })?;
        target.write_f32s(0, span)
    }
}
