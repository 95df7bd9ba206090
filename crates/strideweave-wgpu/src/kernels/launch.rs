//! Preparing and submitting one specialized dispatch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strideweave::carriers::extension::{
    InterfaceHandle, Preparation, PreparedKernel, ProviderResult, Submitted, Unsupported,
};
use strideweave::operation::ResultSpec;
use strideweave::{Error, Result, Tensor, Value};

use super::wgsl::{self, Scalar, Windows, PARAMS_BYTES};
use crate::carrier::GpuInterface;
use crate::completion::GpuCompletion;
use crate::device::{FaultPoint, GpuDevice};
use crate::storage::{SLOT_BYTES, STORAGE_USAGE};

/// The WGSL of a specialization for the bindings its buffers take.
type Shader = Box<dyn Fn(&Windows) -> String + Send + Sync>;

/// The work of one kernel being specialized: the operand tensors in binding order, the base
/// `Params` words, the scratch buffers its passes pass partial results through, and its
/// passes, dispatched in order in one submission.
pub(crate) struct Launch {
    name: &'static str,
    spec: ResultSpec,
    operands: Vec<Tensor>,
    params: [u32; PARAMS_BYTES / 4],
    scalars: usize,
    scratch: Vec<u64>,
    passes: Vec<Pass>,
    checked: Checked,
}

/// Where a pass reads: the operands (in binding order) or one scratch buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The operand tensors' buffers.
    Operands,
    /// The scratch buffer of this index.
    Scratch(usize),
}

/// Where a pass writes: the result buffer or one scratch buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    /// The result carrier's buffer (a checked launch binds the overflow word here too).
    Result,
    /// The scratch buffer of this index.
    Scratch(usize),
}

/// One dispatch of a launch: what it reads and writes, its `Params` words, how many
/// invocations it runs, and its shader with the key (completed by the windows of the
/// buffers bound).
struct Pass {
    source: Source,
    sink: Sink,
    params: [u32; PARAMS_BYTES / 4],
    invocations: usize,
    key: String,
    shader: Shader,
}

/// How a checked dispatch reports leaving the Int32 range through its overflow word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Not checked: no overflow word is bound.
    No,
    /// Elementwise: the word is nonzero when some element left the range.
    Elements,
    /// A sum over mode 1: the word is `0xffffffff - i` for the smallest overflowing result
    /// ordinal `i`.
    Sum,
    /// A product of `rows` result rows: the word names the smallest overflowing result
    /// ordinal like [`Checked::Sum`].
    Product {
        /// N, the result's row count.
        rows: usize,
    },
}

impl Launch {
    pub(crate) fn new(name: &'static str, spec: ResultSpec) -> Launch {
        Launch {
            name,
            spec,
            operands: Vec::new(),
            params: [0; PARAMS_BYTES / 4],
            scalars: 0,
            scratch: Vec::new(),
            passes: Vec::new(),
            checked: Checked::No,
        }
    }

    /// Binds the next operand; its offset goes to `params.off<k>`.
    pub(crate) fn bind(&mut self, tensor: &Tensor) -> Result<()> {
        let k = self.operands.len();
        self.params[4 + k] = self.index(tensor.offset())?;
        self.operands.push(tensor.clone());
        Ok(())
    }

    /// Sets `params.n`, `params.m` and `params.k`.
    pub(crate) fn set_counts(&mut self, n: usize, m: usize, k: usize) -> Result<()> {
        self.params[0] = self.index(n)?;
        self.params[1] = self.index(m)?;
        self.params[2] = self.index(k)?;
        Ok(())
    }

    /// Stores the next weak scalar `value` as `scalar` bits (converted once, as the plan
    /// says): the first in `params.scalar`, a second (a `select` of two scalars) in
    /// `params.scalar2`. The `Params` field it went to.
    pub(crate) fn set_scalar(&mut self, value: Value, scalar: Scalar) -> Result<&'static str> {
        let bits = match (scalar, value) {
            (Scalar::F32, Value::Float(x)) => (x as f32).to_bits(),
            (Scalar::F32, Value::Int(x)) => (x as f32).to_bits(),
            (Scalar::F32, Value::Bool(b)) => f32::from(u8::from(b)).to_bits(),
            (Scalar::I32, Value::Int(x)) => i32::try_from(x).map_err(|_| {
                Error::Overflow(format!("{x} does not fit Int32 in '{}'", self.name))
            })? as u32,
            (Scalar::Bool, Value::Bool(b)) => u32::from(b),
            (_, other) => {
                return Err(Error::Type(format!(
                    "the Gpu '{}' kernel cannot take the scalar {other:?}",
                    self.name
                )))
            }
        };
        let (word, field) = match self.scalars {
            0 => (3, "scalar"),
            1 => (7, "scalar2"),
            _ => {
                return Err(Error::Type(format!(
                    "the Gpu '{}' kernel takes at most two weak scalars",
                    self.name
                )))
            }
        };
        self.scalars += 1;
        self.params[word] = bits;
        Ok(field)
    }

    /// Sets `params.scalar` to raw bits.
    pub(crate) fn set_scalar_bits(&mut self, bits: u32) {
        self.params[3] = bits;
    }

    /// Makes the dispatch bind an overflow word after the parameters (unless `checked` is
    /// [`Checked::No`]) and fail with an Overflow error, publishing nothing, when the shader
    /// set it.
    pub(crate) fn set_checked(&mut self, checked: Checked) {
        self.checked = checked;
    }

    /// Adds the launch's single pass, from the operands to the result over `params.n`
    /// invocations with the parameters set so far, with its specialization key (before the
    /// windows' part) and the shader's generator.
    pub(crate) fn set_shader(
        &mut self,
        key: String,
        shader: impl Fn(&Windows) -> String + Send + Sync + 'static,
    ) {
        self.passes.push(Pass {
            source: Source::Operands,
            sink: Sink::Result,
            params: self.params,
            invocations: self.params[0] as usize,
            key,
            shader: Box::new(shader),
        });
    }

    /// A scratch buffer of `bytes` bytes for passes to exchange partial results through,
    /// allocated with the result: its index.
    pub(crate) fn add_scratch(&mut self, bytes: u64) -> usize {
        self.scratch.push(bytes);
        self.scratch.len() - 1
    }

    /// Adds a pass from `source` to `sink` over `invocations` invocations whose `Params` are
    /// the launch's with `n`, `m`, `k` and `scalar` set to `counts`.
    pub(crate) fn add_pass(
        &mut self,
        (source, sink): (Source, Sink),
        counts: [usize; 4],
        invocations: usize,
        key: String,
        shader: impl Fn(&Windows) -> String + Send + Sync + 'static,
    ) -> Result<()> {
        let mut params = self.params;
        for (word, count) in params.iter_mut().zip(counts) {
            *word = self.index(count)?;
        }
        self.passes.push(Pass {
            source,
            sink,
            params,
            invocations,
            key,
            shader: Box::new(shader),
        });
        Ok(())
    }

    fn index(&self, value: usize) -> Result<u32> {
        u32::try_from(value).map_err(|_| {
            Error::Value(format!(
                "the Gpu '{}' kernel addresses slots with 32-bit indices; {value} is too large",
                self.name
            ))
        })
    }
}

/// One bound byte range of a buffer: its start and size (`None`: the rest of the buffer).
type BoundRange = (u64, Option<wgpu::BufferSize>);

/// An operand buffer and the ranges it is bound as.
type Bound = (wgpu::Buffer, Vec<BoundRange>);

/// The byte ranges a buffer of `bytes` bytes is bound as: the whole buffer when it fits one
/// binding of `window` bytes, consecutive windows of `window` bytes (the last shorter)
/// otherwise.
fn ranges(bytes: u64, window: u64) -> Vec<BoundRange> {
    if bytes <= window {
        return vec![(0, None)];
    }
    (0..bytes.div_ceil(window))
        .map(|w| {
            let start = w * window;
            (start, wgpu::BufferSize::new(window.min(bytes - start)))
        })
        .collect()
}

/// The bytes of one window: the largest multiple of the storage offset alignment within the
/// device's storage binding limit.
fn window_bytes(limits: &wgpu::Limits) -> u64 {
    let limit = limits.max_storage_buffer_binding_size;
    let alignment = u64::from(limits.min_storage_buffer_offset_alignment).max(SLOT_BYTES);
    (limit / alignment * alignment).max(alignment)
}

/// One pass, prepared: its compiled pipeline, what it binds, its parameters and its grid.
struct Prepared {
    pipeline: Arc<wgpu::ComputePipeline>,
    source: Source,
    sink: Sink,
    params: [u32; PARAMS_BYTES / 4],
    grid: (u32, u32),
    checked: bool,
}

/// Prepares `work` on the class's interface: reads the operand buffers, splits every buffer
/// beyond the device's storage binding limit into windows (declining when a pass's bindings
/// exceed the device's storage buffers per stage, or a scratch buffer exceeds one binding),
/// and compiles (or reuses) the pipeline of every pass's specialization; submission runs on
/// the returned record.
pub(crate) fn launch(work: Launch, handle: InterfaceHandle) -> Result<Preparation> {
    let interface = handle.downcast_ref::<GpuInterface>().ok_or_else(|| {
        Error::Type(format!(
            "the Gpu kernels need a GpuInterface, got {}",
            handle.identity()
        ))
    })?;
    let device = Arc::clone(interface.device());
    let window = window_bytes(device.limits());
    let result_slots = work.spec.layout().cosize();
    let result_bytes = device.buffer_size("a kernel result", result_slots as u64 * SLOT_BYTES)?;
    let mut buffers = Vec::with_capacity(work.operands.len());
    for tensor in &work.operands {
        let buffer = interface.buffer_of(tensor)?;
        let bound = ranges(buffer.size(), window);
        buffers.push((buffer, bound));
    }
    let result = ranges(result_bytes, window);
    if let Some(bytes) = work.scratch.iter().find(|bytes| **bytes > window) {
        return Ok(Preparation::Unsupported(Unsupported::new(format!(
            "'{}' would pass {bytes} bytes of partial results between its passes, more than \
             one binding of {window} bytes",
            work.name
        ))?));
    }
    let available = device.limits().max_storage_buffers_per_shader_stage;
    let mut prepared = Vec::with_capacity(work.passes.len());
    for pass in &work.passes {
        let checked = pass.sink == Sink::Result && work.checked != Checked::No;
        let windows = Windows {
            inputs: match pass.source {
                Source::Operands => buffers.iter().map(|(_, r)| r.len() as u32).collect(),
                Source::Scratch(_) => vec![1],
            },
            result: match pass.sink {
                Sink::Result => result.len() as u32,
                Sink::Scratch(_) => 1,
            },
            slots: u32::try_from(window / SLOT_BYTES).unwrap_or(u32::MAX),
        };
        if windows.storage_bindings(checked) > available {
            return Ok(Preparation::Unsupported(Unsupported::new(format!(
                "'{}' would bind {} storage buffers (windows of {window} bytes), more than the \
                 device's {available} per shader stage",
                work.name,
                windows.storage_bindings(checked)
            ))?));
        }
        let Some(grid) = wgsl::grid(pass.invocations) else {
            return Ok(Preparation::Unsupported(Unsupported::new(format!(
                "{} invocations do not fit one dispatch grid",
                pass.invocations
            ))?));
        };
        let key = format!("{}{}", pass.key, windows.key());
        prepared.push(Prepared {
            pipeline: device.pipeline(&key, &(pass.shader)(&windows))?,
            source: pass.source,
            sink: pass.sink,
            params: pass.params,
            grid,
            checked,
        });
    }
    if prepared.is_empty() {
        return Err(Error::Runtime(format!(
            "the Gpu '{}' kernel has no shader",
            work.name
        )));
    }
    let prepared = PreparedKernel::new(handle.clone(), move || {
        submit(&handle, &device, &prepared, &buffers, &result, &work)
    });
    Ok(Preparation::Kernel(prepared))
}

/// The bind-group entries of `buffer` bound as `ranges`, numbered on from `entries`.
fn bind_ranges<'a>(
    entries: &mut Vec<wgpu::BindGroupEntry<'a>>,
    buffer: &'a wgpu::Buffer,
    ranges: &[BoundRange],
) {
    for &(offset, size) in ranges {
        entries.push(wgpu::BindGroupEntry {
            binding: entries.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer,
                offset,
                size,
            }),
        });
    }
}

/// Allocates the result buffer and the scratch buffers, encodes every pass's dispatch in
/// order and submits them together, and returns the pending completion that builds the
/// result carrier once the device finished.
fn submit(
    handle: &InterfaceHandle,
    device: &Arc<GpuDevice>,
    passes: &[Prepared],
    buffers: &[Bound],
    result_ranges: &[BoundRange],
    work: &Launch,
) -> Result<Submitted<ProviderResult>> {
    let slots = work.spec.layout().cosize();
    let label = format!("result of '{}'", work.name);
    let bytes = slots as u64 * SLOT_BYTES;
    let size = device.buffer_size(&label, bytes)?;
    device.check(
        FaultPoint::Allocate,
        &format!("allocate {bytes} bytes for {label}"),
    )?;
    let what = format!("run the Gpu '{}' kernel", work.name);
    let finished = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&finished);
    // One set of error scopes around the whole launch: the result, scratch, parameter and
    // flag buffers, the bind groups, the encoding and the submission.
    let (result, readback, index) = device
        .scoped(FaultPoint::Submit, &what, |d| {
            let storage = |label: &str, size: u64| {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size,
                    usage: STORAGE_USAGE,
                    mapped_at_creation: false,
                })
            };
            let result = storage(&label, size);
            let scratch: Vec<wgpu::Buffer> = work
                .scratch
                .iter()
                .map(|bytes| storage("kernel partial results", (*bytes).max(4)))
                .collect();
            let mut params = Vec::with_capacity(passes.len());
            for pass in passes {
                let buffer = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("kernel params"),
                    size: PARAMS_BYTES as u64,
                    usage: wgpu::BufferUsages::UNIFORM,
                    mapped_at_creation: true,
                });
                let written = buffer.get_mapped_range_mut(..).map(|mut view| {
                    view.slice(..)
                        .copy_from_slice(bytemuck::cast_slice(&pass.params))
                });
                buffer.unmap();
                written?;
                params.push(buffer);
            }
            let flags = (work.checked != Checked::No).then(|| {
                let buffer = |label, usage| {
                    d.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(label),
                        size: SLOT_BYTES,
                        usage,
                        mapped_at_creation: false,
                    })
                };
                (
                    buffer(
                        "overflow flag",
                        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                    ),
                    buffer(
                        "overflow flag readback",
                        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    ),
                )
            });
            let whole: [BoundRange; 1] = [(0, None)];
            let groups: Vec<wgpu::BindGroup> = passes
                .iter()
                .zip(&params)
                .map(|(pass, params)| {
                    let mut entries: Vec<wgpu::BindGroupEntry> = Vec::new();
                    match pass.source {
                        Source::Operands => {
                            for (buffer, ranges) in buffers {
                                bind_ranges(&mut entries, buffer, ranges);
                            }
                        }
                        Source::Scratch(p) => bind_ranges(&mut entries, &scratch[p], &whole),
                    }
                    match pass.sink {
                        Sink::Result => bind_ranges(&mut entries, &result, result_ranges),
                        Sink::Scratch(p) => bind_ranges(&mut entries, &scratch[p], &whole),
                    }
                    entries.push(wgpu::BindGroupEntry {
                        binding: entries.len() as u32,
                        resource: params.as_entire_binding(),
                    });
                    if let (true, Some((flag, _))) = (pass.checked, &flags) {
                        entries.push(wgpu::BindGroupEntry {
                            binding: entries.len() as u32,
                            resource: flag.as_entire_binding(),
                        });
                    }
                    d.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some(work.name),
                        layout: &pass.pipeline.get_bind_group_layout(0),
                        entries: &entries,
                    })
                })
                .collect();
            let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(work.name),
            });
            {
                let mut compute = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(work.name),
                    timestamp_writes: None,
                });
                // Each dispatch sees the writes of the ones before it (WebGPU orders the
                // dispatches of a pass).
                for (pass, group) in passes.iter().zip(&groups) {
                    compute.set_pipeline(&pass.pipeline);
                    compute.set_bind_group(0, group, &[]);
                    compute.dispatch_workgroups(pass.grid.0, pass.grid.1, 1);
                }
            }
            if let Some((flag, readback)) = &flags {
                encoder.copy_buffer_to_buffer(flag, 0, readback, 0, SLOT_BYTES);
            }
            let queue = device.wgpu_queue();
            let index = queue.submit([encoder.finish()]);
            let readback = flags.map(|(_, readback)| readback);
            match &readback {
                // The flag's copy is mapped once the submission finished: that is the signal.
                Some(readback) => readback.slice(..).map_async(wgpu::MapMode::Read, move |_| {
                    done.store(true, Ordering::Release)
                }),
                None => queue.on_submitted_work_done(move || done.store(true, Ordering::Release)),
            }
            Ok((result, readback, index))
        })?
        .map_err(|error: wgpu::MapRangeError| {
            Error::Runtime(format!(
                "GPU {}: cannot write the parameters to {what}: {error}",
                device.adapter().name
            ))
        })?;
    device.count_submission();
    let handle = handle.clone();
    let spec = work.spec.clone();
    let name = work.name;
    let checked = work.checked;
    Ok(Submitted::pending(GpuCompletion::new(
        Arc::clone(device),
        index,
        what,
        finished,
        move || {
            let interface = handle
                .downcast_ref::<GpuInterface>()
                .ok_or_else(|| Error::Type("the Gpu kernels need a GpuInterface".to_string()))?;
            if let Some(readback) = readback {
                overflow_check(&readback, name, checked, interface.device())?;
            }
            let carrier = interface.result_carrier(result, slots, spec.dtype())?;
            ProviderResult::new([spec.tensor(carrier)?])
        },
    )))
}

/// The Overflow error of a checked kernel whose overflow word (copied into the mapped
/// `readback`) was set, naming the operation as the CPU kernels do ("'add' overflows Int32:
/// …") and, for sums and products, the first result that left the range; the readback
/// buffer is released either way.
fn overflow_check(
    readback: &wgpu::Buffer,
    name: &str,
    checked: Checked,
    device: &GpuDevice,
) -> Result<()> {
    let word = readback
        .slice(..)
        .get_mapped_range()
        .map(|view| bytemuck::pod_read_unaligned::<u32>(&view[..4]))
        .map_err(|error| {
            Error::Runtime(format!(
                "GPU {}: reading the overflow flag of '{name}' failed: {error}",
                device.adapter().name
            ))
        });
    if word.is_ok() {
        readback.unmap();
    }
    readback.destroy();
    let word = word?;
    if word == 0 {
        return Ok(());
    }
    let ordinal = (u32::MAX - word) as usize;
    let detail = match checked {
        Checked::Sum => {
            format!("the sum over mode 1 at result ordinal {ordinal} leaves the Int32 range")
        }
        Checked::Product { rows } => format!(
            "out({}, {}) leaves the Int32 range",
            ordinal % rows.max(1),
            ordinal / rows.max(1)
        ),
        Checked::No | Checked::Elements => {
            "an element of the Gpu result leaves the Int32 range".to_string()
        }
    };
    Err(Error::Overflow(format!(
        "'{name}' overflows Int32: {detail}"
    )))
}
