//! The [`GpuHost`] carrier class: host-side staging memory paired with a Gpu class, and its
//! routes GpuHost → Gpu (one bulk upload) and GpuHost → CPU (one host copy).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strideweave::carrier::{Carrier, CarrierClass};
use strideweave::carriers::extension::{
    PreparedTransfer, StorageProvider, Submitted, TransferPreparation, TransferProvider,
    TransferRequest, TransferRoute,
};
use strideweave::carriers::Cpu;
use strideweave::{DType, Error, Result, Shape, Tensor};

use crate::completion::GpuCompletion;
use crate::device::{FaultPoint, GpuDevice};
use crate::storage::{
    adopt_or_create, refuse_unstored, stores, value_word, word_value, write_words, GpuSlots,
    SLOT_BYTES,
};

/// The provider-owned state of one GpuHost carrier: its slots as 32-bit words in host memory,
/// or words staged for `allocate` to adopt.
///
/// A fresh carrier (`HostWords::default()`) gets zero words from `allocate`; a carrier built
/// from values ([`GpuHost::from_f32`], [`GpuHost::from_i32`]) is built from staged words,
/// which `allocate` adopts without a `Value` per slot.
#[derive(Debug, Default)]
pub struct HostWords {
    words: Vec<u32>,
    staged: Option<Vec<u32>>,
    dtype: Option<DType>,
}

impl HostWords {
    /// State whose `allocate` adopts `words`.
    fn staged(words: Vec<u32>) -> HostWords {
        HostWords {
            staged: Some(words),
            ..HostWords::default()
        }
    }

    /// The carrier's words (slot `i` is `words()[i]`).
    pub fn words(&self) -> &[u32] {
        &self.words
    }
}

/// The storage provider of a GpuHost class: a `Vec` of words per carrier.
///
/// Seed rule: the storage provider defines "the complete generic storage surface" and
/// `supports_dtype` answers by identity (Float32, Int32 and Bool). Elementwise fallback is
/// permitted: a slot is a host word, so moving slot by slot to or from another
/// definition-backed class that also permits it costs no device round trip.
fn storage() -> StorageProvider {
    StorageProvider::new(
        |_: &HostWords, dtype| stores(dtype),
        |state: &HostWords| state.words.len() as i64,
        |state: &mut HostWords, slots, dtype| {
            let mut words = adopt_or_create(
                state.staged.take(),
                slots,
                ("GpuHost word buffer", Vec::len),
                || Ok(vec![0; slots]),
            )?;
            words.truncate(slots);
            state.words = words;
            state.dtype = Some(dtype);
            Ok(())
        },
        |state: &mut HostWords| {
            state.words = Vec::new();
            Ok(())
        },
        |state: &HostWords, index| {
            let word = state.words.get(index).copied().ok_or_else(|| {
                Error::Index(format!(
                    "slot {index} of a GpuHost carrier of {} slots",
                    state.words.len()
                ))
            })?;
            Ok(word_value(word, state.dtype))
        },
        |state: &mut HostWords, index, value| {
            let word = value_word(value, state.dtype)?;
            let len = state.words.len();
            let slot = state.words.get_mut(index).ok_or_else(|| {
                Error::Index(format!("slot {index} of a GpuHost carrier of {len} slots"))
            })?;
            *slot = word;
            Ok(())
        },
    )
    .with_elementwise_fallback(true)
    // A factory allocation starts from zero words, so both requested contents already hold.
    .with_allocation_contents(|_: &mut HostWords, _| Ok(()))
}

/// The GpuHost → Gpu route: the request's physical span is copied out of the source's words
/// into a fresh staging buffer (written while mapped at creation), and one submission copies
/// it into the destination's device buffer; the transfer's completion is that submission's.
///
/// Seed rules: "every route's source class SHALL be exactly carrier_class" (this route is
/// declared by the GpuHost definition); `prepare` validates "without changing either Carrier,
/// submitting transfer work, or publishing state" — it checks the dtype only. Nothing writes
/// the destination's buffer but the copy in this transfer's own command buffer: a failure
/// before or at its submission (the staging allocation, the encoding, the submission, a lost
/// device) drops the command buffer, so no later submission can land the words (a
/// `queue.write_buffer` would stay queued for the next one) and the destination keeps its
/// contents.
pub(crate) fn upload_route(
    host: CarrierClass,
    gpu: CarrierClass,
    device: Arc<GpuDevice>,
) -> Result<TransferRoute> {
    let route = format!("{host} → {gpu}");
    let provider = TransferProvider::new(move |request: &TransferRequest| {
        if let Some(refusal) = refuse_unstored(&route, request.dtype())? {
            return Ok(refusal);
        }
        let request = request.clone();
        let device = Arc::clone(&device);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let span = request.physical_span();
                let words = source_span(&request)?;
                let buffer = request
                    .destination()
                    .with_provider_state(|state: &GpuSlots| state.buffer().cloned())??;
                let bytes = span as u64 * SLOT_BYTES;
                if buffer.size() < bytes {
                    return Err(Error::Value(format!(
                        "a Gpu buffer of {} bytes cannot receive {span} uploaded slots",
                        buffer.size()
                    )));
                }
                let what = format!("upload {span} GpuHost slots");
                let staging = device.create_buffer_with(
                    "GpuHost upload staging",
                    bytemuck::cast_slice(&words),
                    wgpu::BufferUsages::COPY_SRC,
                )?;
                let finished = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&finished);
                let index = device.scoped(FaultPoint::Submit, &what, |d| {
                    let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("GpuHost upload"),
                    });
                    if bytes > 0 {
                        encoder.copy_buffer_to_buffer(&staging, 0, &buffer, 0, bytes);
                    }
                    let queue = device.wgpu_queue();
                    let index = queue.submit([encoder.finish()]);
                    queue.on_submitted_work_done(move || flag.store(true, Ordering::Release));
                    index
                })?;
                device.count_submission();
                Ok(Submitted::pending(GpuCompletion::new(
                    Arc::clone(&device),
                    index,
                    what,
                    finished,
                    || Ok(()),
                )))
            },
        )))
    });
    TransferRoute::new(host, gpu, "gpuhost-to-gpu", provider)
}

/// The words of the request's physical span in its GpuHost source (one copy).
fn source_span(request: &TransferRequest) -> Result<Vec<u32>> {
    let source = request.tensor();
    let (start, span) = (source.offset(), request.physical_span());
    let words = source.carrier().with_provider_state(|state: &HostWords| {
        state.words.get(start..start + span).map(<[u32]>::to_vec)
    })?;
    words.ok_or_else(|| {
        Error::Index(format!(
            "slots {start}..{start}+{span} lie outside the GpuHost source of {} slots",
            source.carrier().size()
        ))
    })
}

/// The GpuHost → CPU route: the request's physical span is copied out of the source's words
/// and written into the CPU destination in one bulk copy, during submission (host memory to
/// host memory: nothing is left pending).
///
/// Seed rules: "every route's source class SHALL be exactly carrier_class" (the GpuHost
/// definition declares it, which is how the CPU is reachable from GpuHost at all: the CPU is
/// definition-free and declares no route); `prepare` validates "without changing either
/// Carrier, submitting transfer work, or publishing state" — it checks the dtype only. The
/// destination is written through the transfer request, so the framework's journal undoes
/// the write when the transfer fails after it.
pub(crate) fn cpu_route(host: CarrierClass, device: Arc<GpuDevice>) -> Result<TransferRoute> {
    let route = format!("{host} → CPU");
    let provider = TransferProvider::new(move |request: &TransferRequest| {
        if let Some(refusal) = refuse_unstored(&route, request.dtype())? {
            return Ok(refusal);
        }
        let request = request.clone();
        let device = Arc::clone(&device);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let words = source_span(&request)?;
                device.injected(
                    FaultPoint::HostCopy,
                    &format!("copy {} GpuHost slots to the CPU", words.len()),
                )?;
                write_words(&request, &words)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(host, CarrierClass::of::<Cpu>(), "gpuhost-to-cpu", provider)
}

/// The host-side staging class of a [`Gpu`](crate::Gpu) class: carriers whose slots are
/// 32-bit words in host memory (Float32 or Int32), like pinned host memory beside a CUDA
/// device.
///
/// Why it exists: tier carriers (`Evictable`, `TiledEvictable`) bring data onto their primary
/// tier with moves secondary → primary, and the seed makes every route start at the class
/// that defines it. The CPU is definition-free, so nothing can declare CPU → Gpu, and a move
/// from the CPU to the Gpu has no route. GpuHost is definition-backed and defined by this
/// crate together with the Gpu class, so its definition declares GpuHost → Gpu
/// (`gpuhost-to-gpu`, one bulk upload) while the Gpu definition declares Gpu → GpuHost
/// (`gpu-to-gpuhost`, one bulk download): each route starts at its own defining class, and a
/// GpuHost carrier can be the secondary tier of a Gpu primary.
///
/// The GpuHost definition also declares GpuHost → CPU (`gpuhost-to-cpu`, one host copy), so
/// a tensor on GpuHost moves to the CPU like one on the Gpu. The same rule means a move
/// CPU → GpuHost has no route; GpuHost carriers are built from values
/// ([`from_f32`](GpuHost::from_f32), [`from_i32`](GpuHost::from_i32)) or zeroed
/// ([`carrier`](GpuHost::carrier)), and read back in bulk with [`f32s`](GpuHost::f32s) and
/// [`i32s`](GpuHost::i32s), slot by slot like any carrier, or by a move to the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuHost {
    class: CarrierClass,
    gpu: CarrierClass,
}

impl GpuHost {
    /// The class `class` staging for the Gpu class `gpu`.
    pub(crate) fn new(class: CarrierClass, gpu: CarrierClass) -> GpuHost {
        GpuHost { class, gpu }
    }

    /// The definition of a GpuHost class `class` staging for the Gpu class `gpu`.
    pub(crate) fn definition(
        class: CarrierClass,
        gpu: CarrierClass,
        device: Arc<GpuDevice>,
    ) -> Result<strideweave::CarrierDefinition> {
        strideweave::CarrierDefinition::new(storage()).with_transfers(vec![
            upload_route(class, gpu, Arc::clone(&device))?,
            cpu_route(class, device)?,
        ])
    }

    /// The exact carrier class.
    pub fn class(&self) -> CarrierClass {
        self.class
    }

    /// The Gpu class this class uploads to.
    pub fn gpu_class(&self) -> CarrierClass {
        self.gpu
    }

    /// A mutable GpuHost carrier of `slots` zeroed slots of `dtype`.
    ///
    /// # Errors
    /// Value for a dtype other than Float32, Int32 and Bool.
    pub fn carrier(&self, slots: usize, dtype: DType) -> Result<Carrier> {
        Carrier::create(self.class, HostWords::default(), slots, dtype, true)
    }

    /// A mutable Float32 GpuHost carrier holding `values`.
    ///
    /// # Errors
    /// The construction errors of the carrier extension (none for valid values).
    pub fn from_f32(&self, values: &[f32]) -> Result<Carrier> {
        let words = bytemuck::cast_slice(values).to_vec();
        Carrier::create(
            self.class,
            HostWords::staged(words),
            values.len(),
            DType::FLOAT32,
            true,
        )
    }

    /// A mutable Int32 GpuHost carrier holding `values`.
    ///
    /// # Errors
    /// As [`from_f32`](Self::from_f32).
    pub fn from_i32(&self, values: &[i32]) -> Result<Carrier> {
        let words = bytemuck::cast_slice(values).to_vec();
        Carrier::create(
            self.class,
            HostWords::staged(words),
            values.len(),
            DType::INT32,
            true,
        )
    }

    /// A compact Float32 GpuHost tensor of `shape` holding `values` (column-major).
    ///
    /// # Errors
    /// Value when the count differs from the shape's size.
    pub fn tensor_f32(&self, values: &[f32], shape: Shape) -> Result<Tensor> {
        if values.len() != shape.size() {
            return Err(Error::Value(format!(
                "{} values for a GpuHost tensor of shape {shape} ({} elements)",
                values.len(),
                shape.size()
            )));
        }
        Tensor::compact(self.from_f32(values)?, shape)
    }

    /// Every slot of the Float32 GpuHost `carrier`, read in one copy.
    ///
    /// # Errors
    /// Type when the carrier is not a Float32 carrier of a GpuHost class; Runtime once
    /// released.
    pub fn f32s(carrier: &Carrier) -> Result<Vec<f32>> {
        Ok(bytemuck::cast_slice(&GpuHost::words_of(carrier, DType::FLOAT32)?).to_vec())
    }

    /// Every slot of the Int32 GpuHost `carrier`, read in one copy.
    ///
    /// # Errors
    /// As [`f32s`](Self::f32s), with Int32 for Float32.
    pub fn i32s(carrier: &Carrier) -> Result<Vec<i32>> {
        Ok(bytemuck::cast_slice(&GpuHost::words_of(carrier, DType::INT32)?).to_vec())
    }

    fn words_of(carrier: &Carrier, dtype: DType) -> Result<Vec<u32>> {
        if carrier.is_released() {
            return Err(Error::Runtime(format!(
                "cannot read a released {} carrier",
                carrier.class()
            )));
        }
        if carrier.dtype() != dtype {
            return Err(Error::Type(format!(
                "a bulk {dtype} read of a {} carrier of dtype {}",
                carrier.class(),
                carrier.dtype()
            )));
        }
        carrier.with_provider_state(|state: &HostWords| state.words.clone())
    }
}
