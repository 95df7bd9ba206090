//! The [`Gpu`] carrier class: its definition (storage, kernels, the routes Gpu → CPU and
//! Gpu → GpuHost, the upload facet), its execution interface and its constructors.

use std::sync::{Arc, OnceLock};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    read_f32s, read_i32s, ExecutionInterface, InterfaceHandle, KernelExecutionInterface,
    KernelProvider, PreparedTransfer, ProviderCompletion, Submitted, TransferPreparation,
    TransferProvider, TransferRequest, TransferRoute,
};
use strideweave::carriers::Cpu;
use strideweave::{
    register_carrier_definition, CarrierDefinition, CarrierFacet, DType, Error, Layout, Result,
    Shape, Tensor, Value,
};

use crate::device::GpuDevice;
use crate::host::GpuHost;
use crate::kernels;
use crate::storage::{self, start_download, stores, upload_words, GpuSlots};

/// The version of the Gpu execution interface; kernel packs must be built against it.
pub const INTERFACE_VERSION: &str = "strideweave-wgpu-1";

/// The execution interface of a Gpu class: the device (and through it the queue and the
/// pipeline cache) every kernel pattern of the class prepares and submits on, and the class
/// its results are carriers of.
///
/// Seed rule: "Concrete subclasses MAY add immutable device, stream, addressing, workspace, or
/// submission facilities used by kernels for that exact carrier, but those additions SHALL not
/// change the common identity rule": the identity is `(GpuInterface, INTERFACE_VERSION)`.
#[derive(Debug)]
pub struct GpuInterface {
    base: KernelExecutionInterface,
    device: Arc<GpuDevice>,
    class: CarrierClass,
}

impl GpuInterface {
    /// The device kernels run on.
    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// The Gpu class whose carriers hold the kernels' operands and results.
    pub fn class(&self) -> CarrierClass {
        self.class
    }

    /// A fresh result carrier of this class adopting `buffer` as its `slots` slots of
    /// `dtype`.
    ///
    /// # Errors
    /// The construction errors of [`Carrier::create`] (a buffer too small is a Value error).
    pub fn result_carrier(
        &self,
        buffer: wgpu::Buffer,
        slots: usize,
        dtype: DType,
    ) -> Result<Carrier> {
        Carrier::create(self.class, GpuSlots::staged(buffer), slots, dtype, true)
    }

    /// The device buffer of a tensor on this class (a Type error for any other class).
    pub fn buffer_of(&self, tensor: &Tensor) -> Result<wgpu::Buffer> {
        if tensor.carrier().class() != self.class {
            return Err(Error::Type(format!(
                "a kernel of {} got an operand on {}",
                self.class,
                tensor.carrier().class()
            )));
        }
        tensor
            .carrier()
            .with_provider_state(|state: &GpuSlots| state.buffer().cloned())?
    }
}

impl ExecutionInterface for GpuInterface {
    fn version(&self) -> &str {
        self.base.version()
    }
}

/// The upload facet of a Gpu class: builds a Gpu tensor from a tensor on another carrier.
///
/// Why a facet and not a route: the seed makes transfer routes directional and exact, and
/// "every route's source class SHALL be exactly carrier_class", so the Gpu definition can
/// only declare routes that *start* at Gpu; a move CPU → Gpu has no route, and no
/// elementwise fallback either (the CPU has no storage provider). Placing bytes in device
/// memory is the Gpu author's business, so the Gpu definition registers this facet:
/// [`upload`](GpuUpload::upload) reads the source's slots in bulk (one read of a CPU
/// carrier, slot by slot elsewhere), writes them into a new device buffer in one queue write,
/// and constructs a Gpu carrier adopting that buffer. The source is left as it is (an upload
/// is a copy, not a move).
#[derive(Debug)]
pub struct GpuUpload {
    class: CarrierClass,
    device: Arc<GpuDevice>,
}

impl CarrierFacet for GpuUpload {}

impl GpuUpload {
    /// A Gpu tensor with `tensor`'s layout and values: a new carrier holding the source's
    /// physical span (`layout.cosize()` slots from its offset) at offset 0, so strided and
    /// broadcast views keep their exact layout.
    ///
    /// # Errors
    /// Type when the dtype is neither Float32 nor Int32; the source's read errors; the
    /// device's allocation and queue errors. Nothing is constructed on failure.
    pub fn upload(&self, tensor: &Tensor) -> Result<Tensor> {
        let dtype = tensor.dtype();
        if !stores(dtype) {
            return Err(Error::Type(format!(
                "{} stores Float32, Int32 and Bool, not {dtype}",
                self.class
            )));
        }
        let span = tensor.layout().cosize();
        let words = source_words(tensor.carrier(), tensor.offset(), span)?;
        let buffer = upload_words(&self.device, &words)?;
        let carrier = Carrier::create(self.class, GpuSlots::staged(buffer), span, dtype, true)?;
        Tensor::new(carrier, 0, tensor.layout().clone())
    }

    /// A compact Gpu tensor of `shape` holding `values` (column-major).
    ///
    /// # Errors
    /// Value when the count differs from the shape's size; as [`upload`](Self::upload).
    pub fn from_f32(&self, values: &[f32], shape: Shape) -> Result<Tensor> {
        self.words(bytemuck::cast_slice(values), shape, DType::FLOAT32)
    }

    /// A compact Int32 Gpu tensor of `shape` holding `values` (column-major).
    ///
    /// # Errors
    /// As [`from_f32`](Self::from_f32).
    pub fn from_i32(&self, values: &[i32], shape: Shape) -> Result<Tensor> {
        self.words(bytemuck::cast_slice(values), shape, DType::INT32)
    }

    fn words(&self, words: &[u32], shape: Shape, dtype: DType) -> Result<Tensor> {
        if words.len() != shape.size() {
            return Err(Error::Value(format!(
                "{} values for a Gpu tensor of shape {shape} ({} elements)",
                words.len(),
                shape.size()
            )));
        }
        let buffer = upload_words(&self.device, words)?;
        let carrier = Carrier::create(
            self.class,
            GpuSlots::staged(buffer),
            words.len(),
            dtype,
            true,
        )?;
        Tensor::compact(carrier, shape)
    }
}

/// The 32-bit words of slots `offset..offset + span` of `carrier` (one bulk read of a CPU
/// carrier for Float32 and Int32; a read per slot for Bool, which has no bulk read).
fn source_words(carrier: &Carrier, offset: usize, span: usize) -> Result<Vec<u32>> {
    let dtype = carrier.dtype();
    if dtype == DType::BOOL {
        return (offset..offset + span)
            .map(|slot| match carrier.get(slot)? {
                Value::Bool(b) => Ok(u32::from(b)),
                other => Err(Error::Type(format!(
                    "slot {slot} of a Bool {} carrier read {other:?}",
                    carrier.class()
                ))),
            })
            .collect();
    }
    Ok(if dtype == DType::INT32 {
        bytemuck::cast_slice(&read_i32s(carrier, offset, span)?).to_vec()
    } else {
        bytemuck::cast_slice(&read_f32s(carrier, offset, span)?).to_vec()
    })
}

/// A download route Gpu → `destination` (the CPU, or the class's [`GpuHost`]): one buffer
/// copy into a staging buffer, mapped, then written into the destination in bulk (one copy
/// into a CPU carrier, word by word into a GpuHost carrier's host memory).
///
/// Seed rule: `prepare` validates "without changing either Carrier, submitting transfer work,
/// or publishing state" — it only checks the dtype; the copy is submitted by the prepared
/// transfer, which returns a pending completion (the download finishes on the device).
fn download_route(
    class: CarrierClass,
    destination: CarrierClass,
    id: &str,
    device: Arc<GpuDevice>,
) -> Result<TransferRoute> {
    let route = format!("{class} → {destination}");
    let provider = TransferProvider::new(move |request: &TransferRequest| {
        if let Some(refusal) = storage::refuse_unstored(&route, request.dtype())? {
            return Ok(refusal);
        }
        let request = request.clone();
        let device = Arc::clone(&device);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let source = request.tensor();
                let buffer = source
                    .carrier()
                    .with_provider_state(|state: &GpuSlots| state.buffer().cloned())??;
                let words =
                    start_download(&device, &buffer, source.offset(), request.physical_span())?;
                Ok(Submitted::pending(Downloaded { words, request }))
            },
        )))
    });
    TransferRoute::new(class, destination, id, provider)
}

/// A download's completion that writes the words into the transfer's destination.
struct Downloaded {
    words: crate::completion::GpuCompletion<Vec<u32>>,
    request: TransferRequest,
}

impl ProviderCompletion<()> for Downloaded {
    fn done(&self) -> bool {
        self.words.done()
    }

    fn wait(&self) -> Result<()> {
        storage::write_words(&self.request, &self.words.wait()?)
    }
}

/// A Gpu carrier class on one device: an independent, definition-backed class built only
/// from the public carrier-extension API.
///
/// Its definition has a storage provider over one device buffer per carrier (Float32 and
/// Int32), a kernel provider with the JIT kernel patterns of [`kernels`] on a
/// [`GpuInterface`], the routes Gpu → CPU (`gpu-to-cpu`) and Gpu → GpuHost
/// (`gpu-to-gpuhost`), and the [`GpuUpload`] facet. Each [`Gpu::define`] mints and registers
/// a fresh class together with its [`GpuHost`] staging class (whose definition declares the
/// route GpuHost → Gpu); kernel packs may attach to it (with [`Gpu::interface`]) until it is
/// first observed.
#[derive(Clone, Debug)]
pub struct Gpu {
    class: CarrierClass,
    host: GpuHost,
    device: Arc<GpuDevice>,
    interface: InterfaceHandle,
}

impl Gpu {
    /// Mints and registers a fresh Gpu class on `device`, and its [`GpuHost`] staging class.
    ///
    /// # Errors
    /// The registration errors of the carrier extension (none for a fresh class).
    pub fn define(device: Arc<GpuDevice>) -> Result<Gpu> {
        let class = CarrierClass::mint("Gpu", ClassKind::Independent);
        let host_class = CarrierClass::mint("GpuHost", ClassKind::Independent);
        register_carrier_definition(
            host_class,
            GpuHost::definition(host_class, class, Arc::clone(&device))?,
        )?;
        let interface = InterfaceHandle::new(GpuInterface {
            base: KernelExecutionInterface::new(INTERFACE_VERSION)?,
            device: Arc::clone(&device),
            class,
        })?;
        let definition = CarrierDefinition::new(storage::storage(Arc::clone(&device)))
            .with_kernels(KernelProvider::new(
                interface.clone(),
                kernels::patterns(device.computes_f64())?,
            )?)?
            .with_transfers(vec![
                download_route(
                    class,
                    CarrierClass::of::<Cpu>(),
                    "gpu-to-cpu",
                    Arc::clone(&device),
                )?,
                download_route(class, host_class, "gpu-to-gpuhost", Arc::clone(&device))?,
            ])?
            .with_facets([Arc::new(GpuUpload {
                class,
                device: Arc::clone(&device),
            }) as Arc<dyn CarrierFacet>])?;
        register_carrier_definition(class, definition)?;
        Ok(Gpu {
            class,
            host: GpuHost::new(host_class, class),
            device,
            interface,
        })
    }

    /// The Gpu class of this process on [`GpuDevice::shared`], defined on first use.
    ///
    /// # Errors
    /// NotImplemented when no adapter exists; as [`Gpu::define`].
    pub fn shared() -> Result<Gpu> {
        static SHARED: OnceLock<Result<Gpu>> = OnceLock::new();
        SHARED
            .get_or_init(|| Gpu::define(GpuDevice::shared()?))
            .clone()
    }

    /// The exact carrier class.
    pub fn class(&self) -> CarrierClass {
        self.class
    }

    /// The host-side staging class paired with this class (see [`GpuHost`] for why it
    /// exists): the secondary tier of an `Evictable` or `TiledEvictable` over a Gpu primary.
    pub fn host(&self) -> GpuHost {
        self.host
    }

    /// A mutable Float32 carrier of [`host`](Self::host) holding `values`.
    ///
    /// # Errors
    /// As [`GpuHost::from_f32`].
    pub fn host_from_f32(&self, values: &[f32]) -> Result<Carrier> {
        self.host.from_f32(values)
    }

    /// A mutable Int32 carrier of [`host`](Self::host) holding `values`.
    ///
    /// # Errors
    /// As [`GpuHost::from_i32`].
    pub fn host_from_i32(&self, values: &[i32]) -> Result<Carrier> {
        self.host.from_i32(values)
    }

    /// The device.
    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// The execution interface the class's kernel provider owns (what a kernel pack for this
    /// class is built against).
    pub fn interface(&self) -> &InterfaceHandle {
        &self.interface
    }

    /// A Gpu carrier of `slots` zeroed slots of `dtype`.
    ///
    /// # Errors
    /// Value for a dtype other than Float32, Int32 and Bool; Memory when the device cannot hold it.
    pub fn carrier(&self, slots: usize, dtype: DType) -> Result<Carrier> {
        Carrier::create(self.class, GpuSlots::default(), slots, dtype, true)
    }

    /// The class's upload facet (see [`GpuUpload`] for why uploads are a facet).
    ///
    /// # Errors
    /// As [`Gpu::carrier`] (the facet is read from a carrier of the class).
    pub fn uploader(&self) -> Result<UploadHandle> {
        Ok(UploadHandle {
            carrier: self.carrier(0, DType::FLOAT32)?,
        })
    }

    /// [`GpuUpload::upload`] on this class.
    ///
    /// # Errors
    /// As [`GpuUpload::upload`].
    pub fn upload(&self, tensor: &Tensor) -> Result<Tensor> {
        self.uploader()?.facet()?.upload(tensor)
    }

    /// [`GpuUpload::from_f32`] on this class.
    ///
    /// # Errors
    /// As [`GpuUpload::from_f32`].
    pub fn from_f32(&self, values: &[f32], shape: Shape) -> Result<Tensor> {
        self.uploader()?.facet()?.from_f32(values, shape)
    }

    /// [`GpuUpload::from_i32`] on this class.
    ///
    /// # Errors
    /// As [`GpuUpload::from_i32`].
    pub fn from_i32(&self, values: &[i32], shape: Shape) -> Result<Tensor> {
        self.uploader()?.facet()?.from_i32(values, shape)
    }

    /// A Gpu tensor of `layout` whose physical slots are the words of `values`, for views
    /// that are not compact.
    ///
    /// # Errors
    /// Value when `values` has fewer than `layout.cosize()` slots; as
    /// [`GpuUpload::upload`].
    pub fn strided_f32(&self, values: &[f32], layout: Layout) -> Result<Tensor> {
        let cpu = Cpu::from_f32(values, true)?;
        self.upload(&Tensor::new(cpu, 0, layout)?)
    }
}

/// A carrier of a Gpu class kept to reach its facets.
#[derive(Debug)]
pub struct UploadHandle {
    carrier: Carrier,
}

impl UploadHandle {
    /// The class's [`GpuUpload`] facet.
    ///
    /// # Errors
    /// NotImplemented when the carrier's class registered no upload facet.
    pub fn facet(&self) -> Result<&GpuUpload> {
        self.carrier.require_facet::<GpuUpload>()
    }
}
