//! The Gpu storage provider: a carrier's slots are one device buffer of 32-bit words.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strideweave::carriers::extension::{
    StorageProvider, TransferPreparation, TransferRequest, Unsupported,
};
use strideweave::{DType, Error, Result, Value};

use crate::completion::GpuCompletion;
use crate::device::{FaultPoint, GpuDevice};

/// The bytes of one slot: every dtype the Gpu class stores is 32 bits wide.
pub(crate) const SLOT_BYTES: u64 = 4;

/// The buffer usages of a carrier's storage: bound by kernels, copied from and to.
pub(crate) const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// The dtypes a Gpu carrier stores: Float32, Int32 and Bool, one 32-bit word per slot (a
/// Bool slot is the word 0 or 1).
pub fn stores(dtype: DType) -> bool {
    dtype == DType::FLOAT32 || dtype == DType::INT32 || dtype == DType::BOOL
}

/// The `Unsupported` answer every route of the crate (named `route` in the reason) gives a
/// request whose dtype the Gpu and GpuHost classes do not store, or `None` for one they do.
///
/// Seed rule: `prepare` returns `Unsupported` for a request it cannot transfer, "without
/// changing either Carrier, submitting transfer work, or publishing state".
pub(crate) fn refuse_unstored(route: &str, dtype: DType) -> Result<Option<TransferPreparation>> {
    if stores(dtype) {
        return Ok(None);
    }
    Ok(Some(TransferPreparation::Unsupported(Unsupported::new(
        format!("the {route} route moves Float32, Int32 and Bool, not {dtype}"),
    )?)))
}

/// The provider-owned state of one Gpu carrier: its device buffer, or a buffer staged for
/// `allocate` to adopt.
///
/// A fresh carrier (`GpuSlots::default()`) gets a new zero-filled buffer from `allocate`; a
/// kernel result or an upload is built from [`GpuSlots::staged`] state, whose `allocate`
/// adopts the buffer the work already filled, so no slot goes through a `Value`.
#[derive(Debug, Default)]
pub struct GpuSlots {
    buffer: Option<wgpu::Buffer>,
    staged: Option<wgpu::Buffer>,
    slots: usize,
    dtype: Option<DType>,
}

impl GpuSlots {
    /// State whose `allocate` adopts `buffer`, which must hold at least the allocated slots.
    pub(crate) fn staged(buffer: wgpu::Buffer) -> GpuSlots {
        GpuSlots {
            staged: Some(buffer),
            ..GpuSlots::default()
        }
    }

    /// The device buffer; a Runtime error once released.
    pub fn buffer(&self) -> Result<&wgpu::Buffer> {
        self.buffer
            .as_ref()
            .ok_or_else(|| Error::Runtime("the Gpu carrier's buffer was released".to_string()))
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }
}

/// The storage provider of the Gpu class on `device`.
///
/// Seed rule: the storage provider defines "the complete generic storage surface": `read` and
/// `write` move one slot (a 4-byte copy through a mapped staging buffer, and a 4-byte queue
/// write), `allocate` creates exactly the requested slots (zero-filled by wgpu) or adopts a
/// staged buffer, `release` destroys the buffer. Bulk movement goes around the per-slot
/// surface: uploads through the [`GpuUpload`](crate::GpuUpload) facet and the GpuHost → Gpu
/// route, downloads through the Gpu → CPU and Gpu → GpuHost routes. Factory allocations
/// (`allocate_like`) are zero-filled by wgpu, so the provider states their contents itself.
pub(crate) fn storage(device: Arc<GpuDevice>) -> StorageProvider {
    let allocating = Arc::clone(&device);
    let reading = Arc::clone(&device);
    let gathering = Arc::clone(&device);
    let copying = Arc::clone(&device);
    let writing = device;
    StorageProvider::new(
        |_: &GpuSlots, dtype| stores(dtype),
        |state: &GpuSlots| state.slots as i64,
        move |state: &mut GpuSlots, slots, dtype| {
            let bytes = slots as u64 * SLOT_BYTES;
            let buffer = adopt_or_create(
                state.staged.take(),
                slots,
                ("Gpu buffer", |buffer: &wgpu::Buffer| {
                    (buffer.size() / SLOT_BYTES) as usize
                }),
                || allocating.create_buffer("Gpu carrier storage", bytes, STORAGE_USAGE),
            )?;
            state.buffer = Some(buffer);
            state.slots = slots;
            state.dtype = Some(dtype);
            Ok(())
        },
        |state: &mut GpuSlots| {
            if let Some(buffer) = state.buffer.take() {
                buffer.destroy();
            }
            state.slots = 0;
            Ok(())
        },
        move |state: &GpuSlots, index| {
            reading.count_slot(true);
            let word = download(&reading, state.buffer()?, index, 1)?[0];
            Ok(word_value(word, state.dtype))
        },
        move |state: &mut GpuSlots, index, value| {
            let word = value_word(value, state.dtype)?;
            let buffer = state.buffer()?;
            writing.count_slot(false);
            writing.scoped(FaultPoint::Submit, "write one Gpu slot", |_| {
                writing.wgpu_queue().write_buffer(
                    buffer,
                    index as u64 * SLOT_BYTES,
                    &word.to_ne_bytes(),
                )
            })
        },
    )
    // A factory allocation gets a fresh buffer, which wgpu zero-fills: both requested
    // contents already hold, so the framework need not write a zero per slot (a queue write
    // each).
    .with_allocation_contents(|_: &mut GpuSlots, _| Ok(()))
    .with_bulk_read(move |state: &GpuSlots, indices: &[usize]| {
        let words = gather(&gathering, state.buffer()?, indices)?;
        Ok(words
            .into_iter()
            .map(|word| word_value(word, state.dtype))
            .collect())
    })
    .with_slot_copy(
        |state: &GpuSlots| Ok((state.buffer()?.clone(), state.dtype)),
        move |(to, to_dtype): &(wgpu::Buffer, Option<DType>),
              (from, from_dtype): &(wgpu::Buffer, Option<DType>),
              sources: &[usize],
              targets: &[usize]| {
            if to_dtype != from_dtype {
                return Ok(false);
            }
            copy_slots(&copying, from, to, sources, targets)?;
            Ok(true)
        },
    )
}

/// Two slot lists whose pieces are copied as runs: where consecutive entries of both step
/// by one slot, one copy command moves the whole run.
///
/// The runs of copying `sources[i]` to `targets[i]`: `(source start, target start, length)`.
fn runs(sources: &[usize], targets: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for (&s, &t) in sources.iter().zip(targets) {
        match runs.last_mut() {
            Some((s0, t0, len)) if *s0 + *len == s && *t0 + *len == t => *len += 1,
            _ => runs.push((s, t, 1)),
        }
    }
    runs
}

/// Copies slot `sources[i]` of `from` to slot `targets[i]` of `to` for every `i` with one
/// submission of buffer copies, one per run of consecutive slots; through a scratch buffer
/// when the two are one buffer (wgpu copies between distinct buffers only, and a gather
/// first keeps overlapping runs from reading slots already overwritten).
///
/// Seed rule (scatter): all or nothing — the copies are encoded into one command buffer,
/// and a failure before or at its submission (an injected fault, a lost device) drops it,
/// so nothing is written.
fn copy_slots(
    device: &Arc<GpuDevice>,
    from: &wgpu::Buffer,
    to: &wgpu::Buffer,
    sources: &[usize],
    targets: &[usize],
) -> Result<()> {
    if sources.is_empty() {
        return Ok(());
    }
    let bytes = |slots: usize| slots as u64 * SLOT_BYTES;
    let through = if from == to {
        Some(device.create_buffer("Gpu slot copy scratch", bytes(sources.len()), STORAGE_USAGE)?)
    } else {
        None
    };
    let commands = device.scoped(FaultPoint::Submit, "encode a Gpu slot copy", |d| {
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("Gpu slot copy"),
        });
        match &through {
            None => {
                for (s, t, len) in runs(sources, targets) {
                    encoder.copy_buffer_to_buffer(from, bytes(s), to, bytes(t), bytes(len));
                }
            }
            Some(scratch) => {
                let ordinals: Vec<usize> = (0..sources.len()).collect();
                for (s, at, len) in runs(sources, &ordinals) {
                    encoder.copy_buffer_to_buffer(from, bytes(s), scratch, bytes(at), bytes(len));
                }
                for (at, t, len) in runs(&ordinals, targets) {
                    encoder.copy_buffer_to_buffer(scratch, bytes(at), to, bytes(t), bytes(len));
                }
            }
        }
        encoder.finish()
    })?;
    // The scratch buffer is dropped here; wgpu frees it once the submission is done.
    device.submit("copy Gpu slots", commands).map(|_| ())
}

/// Slots closer than this to the end of the previous piece of a gather join that piece: a
/// short gap costs less to copy along than another copy command.
const GATHER_GAP: usize = 1024;

/// The words at `indices` of `buffer` (any order, repeats allowed), read in one download:
/// the distinct slots are grouped into pieces (a gap of at most [`GATHER_GAP`] slots joins
/// two), each piece is copied into one staging buffer, and the submission is waited on.
fn gather(device: &Arc<GpuDevice>, buffer: &wgpu::Buffer, indices: &[usize]) -> Result<Vec<u32>> {
    use strideweave::carriers::extension::ProviderCompletion;
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    for slot in sorted {
        match pieces.last_mut() {
            Some((start, len)) if slot <= *start + *len + GATHER_GAP => *len = slot + 1 - *start,
            _ => pieces.push((slot, 1)),
        }
    }
    let words = start_download_pieces(device, buffer, &pieces)?.wait()?;
    let mut at = Vec::with_capacity(pieces.len());
    let mut staged = 0;
    for &(start, len) in &pieces {
        at.push((start, staged));
        staged += len;
    }
    indices
        .iter()
        .map(|&slot| {
            let piece = at.partition_point(|&(start, _)| start <= slot) - 1;
            let (start, staged) = at[piece];
            Ok(words[staged + slot - start])
        })
        .collect()
}

/// The storage an `allocate` of `slots` slots gives a carrier of the Gpu or GpuHost class:
/// the `staged` storage (a buffer or words that an upload or a kernel already filled) when
/// its capacity in slots (`capacity.1`) holds them, fresh storage from `create` when nothing
/// is staged, and a Value error naming the staged kind (`capacity.0`) when it is too small.
///
/// Seed rule: `allocate` creates "exactly the requested slots"; adopting staged storage keeps
/// a carrier built from device or host work from passing every slot through a `Value`.
pub(crate) fn adopt_or_create<T>(
    staged: Option<T>,
    slots: usize,
    (kind, capacity): (&str, impl Fn(&T) -> usize),
    create: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match staged {
        Some(storage) if capacity(&storage) >= slots => Ok(storage),
        Some(storage) => Err(Error::Value(format!(
            "a staged {kind} of {} slots cannot hold {slots} slots",
            capacity(&storage)
        ))),
        None => create(),
    }
}

/// The value a 32-bit word holds in `dtype`.
pub(crate) fn word_value(word: u32, dtype: Option<DType>) -> Value {
    if dtype == Some(DType::INT32) {
        Value::Int(i64::from(word as i32))
    } else if dtype == Some(DType::BOOL) {
        Value::Bool(word != 0)
    } else {
        Value::Float(f64::from(f32::from_bits(word)))
    }
}

/// Writes `words` (slots of the request's dtype) into the transfer's destination from slot
/// 0: one bulk copy into a CPU destination for Float32 and Int32, a write per slot for Bool
/// (the transfer request has no bulk Bool write).
pub(crate) fn write_words(request: &TransferRequest, words: &[u32]) -> Result<()> {
    let dtype = request.dtype();
    if dtype == DType::INT32 {
        request.write_i32s(0, bytemuck::cast_slice(words))
    } else if dtype == DType::BOOL {
        for (slot, word) in words.iter().enumerate() {
            request.write(slot, Value::Bool(*word != 0))?;
        }
        Ok(())
    } else {
        request.write_f32s(0, bytemuck::cast_slice(words))
    }
}

/// The 32-bit word of an already normalized `value` of `dtype`.
pub(crate) fn value_word(value: Value, dtype: Option<DType>) -> Result<u32> {
    match value {
        Value::Float(x) if dtype == Some(DType::FLOAT32) => Ok((x as f32).to_bits()),
        Value::Int(x) if dtype == Some(DType::INT32) => i32::try_from(x)
            .map(|x| x as u32)
            .map_err(|_| Error::Overflow(format!("{x} does not fit a Gpu Int32 slot"))),
        Value::Bool(b) if dtype == Some(DType::BOOL) => Ok(u32::from(b)),
        other => Err(Error::Type(format!(
            "a Gpu carrier of {} cannot store {other:?}",
            dtype.map_or_else(|| "no dtype".to_string(), |d| d.to_string())
        ))),
    }
}

/// Reads `slots` words from slot `start` of `buffer`, blocking until they arrive.
pub(crate) fn download(
    device: &Arc<GpuDevice>,
    buffer: &wgpu::Buffer,
    start: usize,
    slots: usize,
) -> Result<Vec<u32>> {
    use strideweave::carriers::extension::ProviderCompletion;
    start_download(device, buffer, start, slots)?.wait()
}

/// Starts copying `slots` words from slot `start` of `buffer` into a mapped staging buffer:
/// the completion of the words.
pub(crate) fn start_download(
    device: &Arc<GpuDevice>,
    buffer: &wgpu::Buffer,
    start: usize,
    slots: usize,
) -> Result<GpuCompletion<Vec<u32>>> {
    start_download_pieces(device, buffer, &[(start, slots)])
}

/// Starts copying the `(start, slots)` pieces of `buffer`, one after the other, into one
/// mapped staging buffer (one submission): the completion of their words, in piece order.
fn start_download_pieces(
    device: &Arc<GpuDevice>,
    buffer: &wgpu::Buffer,
    pieces: &[(usize, usize)],
) -> Result<GpuCompletion<Vec<u32>>> {
    let slots: usize = pieces.iter().map(|&(_, len)| len).sum();
    let bytes = slots as u64 * SLOT_BYTES;
    let staging = device.create_buffer(
        "Gpu download staging",
        bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    )?;
    let commands = device.scoped(FaultPoint::Submit, "encode a Gpu download", |d| {
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("Gpu download"),
        });
        let mut staged = 0;
        for &(start, len) in pieces.iter().filter(|&&(_, len)| len > 0) {
            encoder.copy_buffer_to_buffer(
                buffer,
                start as u64 * SLOT_BYTES,
                &staging,
                staged,
                len as u64 * SLOT_BYTES,
            );
            staged += len as u64 * SLOT_BYTES;
        }
        encoder.finish()
    })?;
    let index = device.submit("download Gpu slots", commands)?;
    let mapped: Arc<Mutex<Option<std::result::Result<(), wgpu::BufferAsyncError>>>> =
        Arc::new(Mutex::new(None));
    let finished = Arc::new(AtomicBool::new(false));
    let (slot, flag) = (Arc::clone(&mapped), Arc::clone(&finished));
    device.scoped(FaultPoint::Map, "map a Gpu download", |_| {
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |outcome| {
                *slot.lock() = Some(outcome);
                flag.store(true, Ordering::Release);
            })
    })?;
    let name = device.adapter().name.clone();
    Ok(GpuCompletion::new(
        Arc::clone(device),
        index,
        format!("download {slots} Gpu slots"),
        finished,
        move || {
            let outcome = mapped.lock().take();
            match outcome {
                Some(Ok(())) => {}
                Some(Err(error)) => {
                    return Err(Error::Runtime(format!(
                        "GPU {name}: mapping the downloaded slots failed: {error}"
                    )))
                }
                None => {
                    return Err(Error::Runtime(format!(
                        "GPU {name}: the downloaded slots were never mapped"
                    )))
                }
            }
            let words = {
                let view = staging.slice(..).get_mapped_range().map_err(|error| {
                    Error::Runtime(format!(
                        "GPU {name}: reading the downloaded slots failed: {error}"
                    ))
                })?;
                bytemuck::pod_collect_to_vec::<u8, u32>(&view[..bytes as usize])
            };
            staging.unmap();
            staging.destroy();
            Ok(words)
        },
    ))
}

/// A new storage buffer holding `words`, written at creation.
pub(crate) fn upload_words(device: &GpuDevice, words: &[u32]) -> Result<wgpu::Buffer> {
    device.create_buffer_with("Gpu upload", bytemuck::cast_slice(words), STORAGE_USAGE)
}
