//! [`GpuDevice`]: one wgpu adapter, device and queue, with the error handling every GPU call
//! goes through and the pipeline cache the JIT kernels share.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use strideweave::{Error, Result};

use crate::reduction_rule::ReductionRule;

/// A point in the carrier's GPU work where a fault can be injected for testing the error
/// paths (see [`GpuDevice::inject_fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// Creating a device buffer (storage allocation, kernel results, staging buffers).
    Allocate,
    /// Compiling a shader module and its compute pipeline.
    Compile,
    /// Submitting encoded work to the queue.
    Submit,
    /// Mapping a staging buffer to read results back.
    Map,
    /// Copying a GpuHost carrier's host words into a carrier of another class (no wgpu call:
    /// the hook by which host-side route failures are tested).
    HostCopy,
}

/// The kind of wgpu failure an injected fault reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The device ran out of memory (wgpu's `Error::OutOfMemory`).
    OutOfMemory,
    /// The device was lost.
    DeviceLost,
    /// wgpu rejected the call as invalid (wgpu's `Error::Validation`).
    Validation,
}

/// How the device was chosen: the adapter's identity, for messages and the tour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    /// The adapter's name ("llvmpipe (LLVM 15.0.6, 256 bits)", a GPU's product name).
    pub name: String,
    /// The backend (Vulkan, Metal, Dx12).
    pub backend: String,
    /// The device type (DiscreteGpu, IntegratedGpu, Cpu, …).
    pub device_type: String,
    /// The driver and its version, as the driver reports them.
    pub driver: String,
}

impl fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {}, {})",
            self.name, self.backend, self.device_type, self.driver
        )
    }
}

/// The compiled compute pipelines of one device, by specialization key.
#[derive(Default)]
struct PipelineCache {
    pipelines: FxHashMap<String, Arc<wgpu::ComputePipeline>>,
    compiled: u64,
    reused: u64,
}

/// One GPU: the wgpu device and queue every carrier, kernel and transfer of a
/// [`Gpu`](crate::Gpu) class uses, and the shared state around them.
///
/// Every fallible wgpu call made through it runs inside error scopes (validation, out of
/// memory, internal) and becomes a [`strideweave::Error`]: out of memory is
/// [`Error::Memory`], validation and internal errors and a lost device are
/// [`Error::Runtime`], each naming what was being done. wgpu's default handler for an error
/// outside every scope panics; this device replaces it with one that records the error, and
/// the next call through the device reports it, so no wgpu error ever panics.
pub struct GpuDevice {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: AdapterSummary,
    limits: wgpu::Limits,
    float64: bool,
    lost: Arc<Mutex<Option<String>>>,
    uncaptured: Arc<Mutex<Vec<String>>>,
    pipelines: Mutex<PipelineCache>,
    faults: Mutex<FxHashMap<FaultPoint, Fault>>,
    submissions: AtomicU64,
    slot_reads: AtomicU64,
    slot_writes: AtomicU64,
    reduction: Mutex<ReductionRule>,
    tiles: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuDevice")
            .field("adapter", &self.adapter)
            .finish_non_exhaustive()
    }
}

impl GpuDevice {
    /// Opens the first adapter wgpu finds on this machine (Vulkan, Metal or DX12; high
    /// performance preferred; no surface needed) with that adapter's own limits, and with
    /// binary64 shader arithmetic when the adapter offers it.
    ///
    /// # Errors
    /// NotImplemented when no adapter exists (no GPU and no software driver such as Mesa's
    /// llvmpipe); Runtime when the adapter refuses to open a device.
    pub fn open() -> Result<GpuDevice> {
        GpuDevice::open_on(
            wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
            "GPU adapter (Vulkan, Metal or DX12)",
        )
    }

    /// [`open`](Self::open) on wgpu's Metal backend only: an Apple GPU (the device under the
    /// core's `Metal` carriers, see [`crate::metal`]).
    ///
    /// # Errors
    /// NotImplemented when wgpu finds no Metal adapter (every machine that is not an Apple
    /// one: wgpu builds its Metal backend for Apple targets only); as [`open`](Self::open).
    pub fn open_metal() -> Result<GpuDevice> {
        GpuDevice::open_on(wgpu::Backends::METAL, "Metal adapter")
    }

    /// Opens the first adapter of `backends`; `what` names the adapter in the error when
    /// there is none.
    fn open_on(backends: wgpu::Backends, what: &str) -> Result<GpuDevice> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends,
            ..wgpu::InstanceDescriptor::new_without_display_handle_from_env()
        });
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            ..Default::default()
        }))
        .map_err(|error| Error::NotImplemented(format!("no {what} is available: {error}")))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let float64 = adapter.features().contains(wgpu::Features::SHADER_F64);
        let features = if float64 {
            wgpu::Features::SHADER_F64
        } else {
            wgpu::Features::empty()
        };
        let cpu_device = info.device_type == wgpu::DeviceType::Cpu;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("strideweave-wgpu"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|error| {
            Error::Runtime(format!(
                "the GPU adapter {} refused to open a device: {error}",
                info.name
            ))
        })?;
        let lost = Arc::new(Mutex::new(None));
        let lost_slot = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            *lost_slot.lock() = Some(format!("{reason:?}: {message}"));
        });
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            sink.lock().push(error.to_string());
        }));
        Ok(GpuDevice {
            device,
            queue,
            adapter: AdapterSummary {
                name: info.name,
                backend: format!("{:?}", info.backend),
                device_type: format!("{:?}", info.device_type),
                driver: format!("{} {}", info.driver, info.driver_info)
                    .trim()
                    .to_string(),
            },
            limits,
            float64,
            lost,
            uncaptured,
            pipelines: Mutex::new(PipelineCache::default()),
            faults: Mutex::new(FxHashMap::default()),
            submissions: AtomicU64::new(0),
            slot_reads: AtomicU64::new(0),
            slot_writes: AtomicU64::new(0),
            reduction: Mutex::new(if cpu_device {
                ReductionRule::for_cpu_device()
            } else {
                ReductionRule::for_gpu()
            }),
            tiles: std::sync::atomic::AtomicBool::new(!cpu_device),
        })
    }

    /// The device of this process, opened on first use and shared afterwards (the same
    /// answer, success or error, every time).
    ///
    /// # Errors
    /// As [`GpuDevice::open`].
    pub fn shared() -> Result<Arc<GpuDevice>> {
        static SHARED: OnceLock<Result<Arc<GpuDevice>>> = OnceLock::new();
        SHARED
            .get_or_init(|| GpuDevice::open().map(Arc::new))
            .clone()
    }

    /// The adapter this device was opened on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.adapter
    }

    /// The device limits (the adapter's own, as requested).
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Whether shaders on this device compute in binary64 (wgpu's `SHADER_F64`, requested
    /// when the adapter has it): what the Float32 plans accumulating in Float64 need.
    pub fn computes_f64(&self) -> bool {
        self.float64
    }

    /// The wgpu device, for kernel packs that encode their own work.
    pub fn wgpu_device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The wgpu queue, for kernel packs that submit their own work.
    pub fn wgpu_queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// How many pipelines were compiled, and how many preparations reused a cached one.
    pub fn pipeline_counts(&self) -> (u64, u64) {
        let cache = self.pipelines.lock();
        (cache.compiled, cache.reused)
    }

    /// The specialization keys of the cached pipelines, sorted.
    pub fn pipeline_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.pipelines.lock().pipelines.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// How many queue submissions this device made.
    pub fn submission_count(&self) -> u64 {
        self.submissions.load(Ordering::Relaxed)
    }

    /// When reductions on this device run one invocation per result instead of as a tree:
    /// [`ReductionRule::for_cpu_device`] on an adapter of type `Cpu` (llvmpipe),
    /// [`ReductionRule::for_gpu`] otherwise, until
    /// [`set_reduction_rule`](Self::set_reduction_rule) changes it.
    pub fn reduction_rule(&self) -> ReductionRule {
        *self.reduction.lock()
    }

    /// Makes later reductions on this device follow `rule` (both forms compute the same
    /// values within docs/kernel-semantics.md's tolerance; their pipelines are cached under
    /// different keys, so switching compiles nothing twice).
    pub fn set_reduction_rule(&self, rule: ReductionRule) {
        *self.reduction.lock() = rule;
    }

    /// Whether the workgroup-tiled `matmul` pattern runs on this device: compact Float32
    /// products load 16 × 16 tiles of both operands into workgroup memory
    /// (docs/gpu-carrier.md, "Products"). Off from the start on an adapter of type `Cpu`
    /// (llvmpipe, where the tiles measured 1.0–1.3× slower than one invocation per result:
    /// its workgroups run on one thread each and pay for every barrier), on elsewhere.
    pub fn workgroup_tiles(&self) -> bool {
        self.tiles.load(Ordering::Relaxed)
    }

    /// Turns the workgroup-tiled `matmul` pattern on or off for later preparations (off, the
    /// tiled pattern declines and the one-invocation-per-result kernel runs; the benchmarks
    /// measure one against the other this way).
    pub fn set_workgroup_tiles(&self, on: bool) {
        self.tiles.store(on, Ordering::Relaxed);
    }

    /// How many single slots the storage surface of this device's carriers read and wrote
    /// (`read` and `write`, one device round trip or queue write each): what the bulk paths
    /// (uploads, routes, slot copies between carriers) exist to avoid.
    pub fn slot_counts(&self) -> (u64, u64) {
        (
            self.slot_reads.load(Ordering::Relaxed),
            self.slot_writes.load(Ordering::Relaxed),
        )
    }

    /// Counts one single-slot read (`true`) or write (`false`) of the storage surface.
    pub(crate) fn count_slot(&self, read: bool) {
        let counter = if read {
            &self.slot_reads
        } else {
            &self.slot_writes
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes the next GPU call at `point` fail with `fault`, through the same conversion a
    /// real wgpu error takes (a test hook for the failure paths; the fault fires once).
    pub fn inject_fault(&self, point: FaultPoint, fault: Fault) {
        self.faults.lock().insert(point, fault);
    }

    /// Withdraws a fault injected at `point` that has not fired yet, and says whether one
    /// was pending (false: it fired, or none was injected). A test that arms a fault around
    /// an action uses it to learn whether the action reached `point`, and to leave nothing
    /// armed for the next one.
    pub fn clear_fault(&self, point: FaultPoint) -> bool {
        self.faults.lock().remove(&point).is_some()
    }

    /// Destroys the wgpu device: every later call through it fails as a lost device (how the
    /// tests lose a device for real).
    pub fn destroy(&self) {
        self.device.destroy();
        let _ = self.device.poll(wgpu::PollType::Poll);
        let mut lost = self.lost.lock();
        if lost.is_none() {
            *lost = Some("Destroyed: the device was destroyed".to_string());
        }
    }

    /// The error of a lost device, a recorded uncaptured error or an injected fault at
    /// `point`, if any: checked before every call through the device.
    pub(crate) fn check(&self, point: FaultPoint, what: &str) -> Result<()> {
        if let Some(reason) = self.lost.lock().clone() {
            return Err(Error::Runtime(format!(
                "GPU {}: cannot {what}: the device was lost ({reason})",
                self.adapter.name
            )));
        }
        let uncaptured: Vec<String> = std::mem::take(&mut *self.uncaptured.lock());
        if !uncaptured.is_empty() {
            return Err(Error::Runtime(format!(
                "GPU {}: cannot {what}: an earlier wgpu call failed outside an error scope: {}",
                self.adapter.name,
                uncaptured.join("; ")
            )));
        }
        self.injected(point, what)
    }

    /// The error of a fault injected at `point`, if any (it fires once). Host-side work that
    /// makes no wgpu call checks only this: a lost device does not stop a copy between host
    /// memories.
    pub(crate) fn injected(&self, point: FaultPoint, what: &str) -> Result<()> {
        match self.faults.lock().remove(&point) {
            None => Ok(()),
            Some(Fault::DeviceLost) => Err(Error::Runtime(format!(
                "GPU {}: cannot {what}: the device was lost (injected)",
                self.adapter.name
            ))),
            Some(Fault::OutOfMemory) => Err(self.convert(
                what,
                wgpu::Error::OutOfMemory {
                    source: Box::new(Injected),
                },
            )),
            Some(Fault::Validation) => Err(self.convert(
                what,
                wgpu::Error::Validation {
                    source: Box::new(Injected),
                    description: "injected validation failure".to_string(),
                },
            )),
        }
    }

    /// The strideweave error for wgpu's `error` while doing `what`.
    fn convert(&self, what: &str, error: wgpu::Error) -> Error {
        let name = &self.adapter.name;
        match error {
            wgpu::Error::OutOfMemory { .. } => {
                Error::Memory(format!("GPU {name}: out of device memory to {what}"))
            }
            wgpu::Error::Validation { description, .. } => Error::Runtime(format!(
                "GPU {name}: wgpu rejected the call to {what}: {}",
                description.trim()
            )),
            wgpu::Error::Internal { description, .. } => Error::Runtime(format!(
                "GPU {name}: internal error while trying to {what}: {}",
                description.trim()
            )),
        }
    }

    /// Runs `call` (wgpu calls on this device) inside out-of-memory, validation and internal
    /// error scopes, after the checks of [`check`](Self::check) for `point`: the first error
    /// any scope caught, converted, or `call`'s value.
    pub fn scoped<T>(
        &self,
        point: FaultPoint,
        what: &str,
        call: impl FnOnce(&wgpu::Device) -> T,
    ) -> Result<T> {
        self.check(point, what)?;
        let memory = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let value = call(&self.device);
        let errors = [
            pollster::block_on(internal.pop()),
            pollster::block_on(validation.pop()),
            pollster::block_on(memory.pop()),
        ];
        match errors.into_iter().flatten().next() {
            Some(error) => Err(self.convert(what, error)),
            None => self.check_lost(what).map(|()| value),
        }
    }

    /// A Runtime error when the device was lost (checked after each scoped call).
    fn check_lost(&self, what: &str) -> Result<()> {
        match self.lost.lock().clone() {
            Some(reason) => Err(Error::Runtime(format!(
                "GPU {}: cannot {what}: the device was lost ({reason})",
                self.adapter.name
            ))),
            None => Ok(()),
        }
    }

    /// The size a buffer of `bytes` bytes gets (at least 4, a multiple of 4), or a Memory
    /// error naming `label` when it exceeds the device's largest buffer.
    pub(crate) fn buffer_size(&self, label: &str, bytes: u64) -> Result<u64> {
        let size = bytes.max(4).next_multiple_of(4);
        if size > self.limits.max_buffer_size {
            return Err(Error::Memory(format!(
                "GPU {}: {label} needs {bytes} bytes, more than the device's largest buffer \
                 ({} bytes)",
                self.adapter.name, self.limits.max_buffer_size
            )));
        }
        Ok(size)
    }

    /// Counts one queue submission made outside [`submit`](Self::submit).
    pub(crate) fn count_submission(&self) {
        self.submissions.fetch_add(1, Ordering::Relaxed);
    }

    /// A new buffer of `bytes` bytes (at least 4) with `usage`, zero-filled by wgpu.
    ///
    /// # Errors
    /// Memory when `bytes` exceeds the device's largest buffer or the device is out of
    /// memory; the errors of [`scoped`](Self::scoped).
    pub fn create_buffer(
        &self,
        label: &str,
        bytes: u64,
        usage: wgpu::BufferUsages,
    ) -> Result<wgpu::Buffer> {
        let size = self.buffer_size(label, bytes)?;
        self.scoped(
            FaultPoint::Allocate,
            &format!("allocate {bytes} bytes for {label}"),
            |device| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size,
                    usage,
                    mapped_at_creation: false,
                })
            },
        )
    }

    /// A new buffer with `usage` holding `contents` (padded with zeros to a multiple of 4
    /// bytes, at least 4), written while mapped at creation: no staging copy through the
    /// queue.
    ///
    /// # Errors
    /// As [`create_buffer`](Self::create_buffer); Runtime when the mapped range cannot be
    /// written.
    pub fn create_buffer_with(
        &self,
        label: &str,
        contents: &[u8],
        usage: wgpu::BufferUsages,
    ) -> Result<wgpu::Buffer> {
        let bytes = contents.len() as u64;
        let size = self.buffer_size(label, bytes)?;
        let what = format!("allocate {bytes} bytes for {label}");
        let buffer = self.scoped(FaultPoint::Allocate, &what, |device| {
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: true,
            });
            let written = buffer.get_mapped_range_mut(..).map(|mut view| {
                view.slice(..contents.len()).copy_from_slice(contents);
            });
            buffer.unmap();
            written.map(|()| buffer)
        })?;
        buffer.map_err(|error| {
            Error::Runtime(format!(
                "GPU {}: cannot write the contents of {label}: {error}",
                self.adapter.name
            ))
        })
    }

    /// The compute pipeline of `key`, compiled from `wgsl` (entry point `main`) on first use
    /// and cached: a later call with the same key reuses the compiled pipeline and ignores
    /// `wgsl` (the key must determine the source). A failed compilation caches nothing.
    ///
    /// # Errors
    /// Runtime naming the key and wgpu's message when the shader or the pipeline fails
    /// validation; the errors of [`scoped`](Self::scoped).
    pub fn pipeline(&self, key: &str, wgsl: &str) -> Result<Arc<wgpu::ComputePipeline>> {
        {
            let mut cache = self.pipelines.lock();
            if let Some(pipeline) = cache.pipelines.get(key).cloned() {
                cache.reused += 1;
                return Ok(pipeline);
            }
        }
        let pipeline = self.scoped(
            FaultPoint::Compile,
            &format!("compile the compute kernel '{key}'"),
            |device| {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(key),
                    source: wgpu::ShaderSource::Wgsl(wgsl.into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(key),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
            },
        )?;
        let pipeline = Arc::new(pipeline);
        let mut cache = self.pipelines.lock();
        let entry = cache
            .pipelines
            .entry(key.to_string())
            .or_insert_with(|| Arc::clone(&pipeline))
            .clone();
        cache.compiled += 1;
        Ok(entry)
    }

    /// Submits `commands` to the queue: the submission index to wait on.
    ///
    /// # Errors
    /// The errors of [`scoped`](Self::scoped) at [`FaultPoint::Submit`].
    pub fn submit(
        &self,
        what: &str,
        commands: wgpu::CommandBuffer,
    ) -> Result<wgpu::SubmissionIndex> {
        let index = self.scoped(FaultPoint::Submit, what, |_| self.queue.submit([commands]))?;
        self.submissions.fetch_add(1, Ordering::Relaxed);
        Ok(index)
    }

    /// Polls the device once without blocking; a lost device is a Runtime error.
    pub(crate) fn poll(&self, what: &str) -> Result<()> {
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.check_lost(what)
    }

    /// Blocks until every submission finished and its callbacks ran; a lost device is a
    /// Runtime error.
    pub(crate) fn wait_idle(&self, what: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|error| {
                Error::Runtime(format!(
                    "GPU {}: waiting to {what} failed: {error}",
                    self.adapter.name
                ))
            })?;
        self.check_lost(what)
    }

    /// Blocks until `index` finished on the device; a lost device is a Runtime error.
    pub(crate) fn wait_for(&self, index: &wgpu::SubmissionIndex, what: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index.clone()),
                timeout: None,
            })
            .map_err(|error| {
                Error::Runtime(format!(
                    "GPU {}: waiting to {what} failed: {error}",
                    self.adapter.name
                ))
            })?;
        self.check_lost(what)
    }
}

/// The source of an injected wgpu error.
#[derive(Debug)]
struct Injected;

impl fmt::Display for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("injected by GpuDevice::inject_fault")
    }
}

impl std::error::Error for Injected {}
