//! `strideweave._native`: the extension module of the Python package, wrapping the public
//! Rust API of the `strideweave` crate and adding no semantics of its own. The pure-Python
//! package `strideweave` (python/strideweave) re-exports it.

mod authoring;
mod autograd;
mod autograd_context;
mod block_device;
mod callback_error;
mod capabilities;
mod carrier;
mod convert;
mod dtype;
mod errors;
mod finalization;
mod gpu;
mod layout;
mod layout_helpers;
mod legacy;
mod legacy_dependent;
mod legacy_pending;
mod movement;
mod moves;
mod numpy_interop;
mod planning;
mod residency;
mod tensor;
mod tiled;
mod tiny;

mod composite;
mod custom_ops;
mod dlpack;
mod invocation;
mod kernels;
mod prepared;
mod routes;

mod bulk_write;
mod instance_link;
mod reference;
mod residency_progress;

#[cfg(feature = "mpi")]
mod mpi;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    finalization::register(m)?;
    #[cfg(feature = "mpi")]
    mpi::register(m)?;
    m.add("CLOSED_CARRIER_MESSAGE", carrier::CLOSED_CARRIER_MESSAGE)?;
    m.add(
        "UnsupportedOperationPlan",
        py.get_type::<errors::UnsupportedOperationPlan>(),
    )?;
    m.add(
        "ProviderContractError",
        py.get_type::<errors::ProviderContractError>(),
    )?;
    m.add_function(wrap_pyfunction!(errors::_raise_core_error, m)?)?;

    m.add_class::<dtype::PyDType>()?;
    m.add_class::<layout::PyLayout>()?;
    m.add_class::<layout::PyComposition>()?;

    m.add_class::<carrier::PyCarrier>()?;
    m.add_class::<carrier::PyCpu>()?;
    m.add_class::<carrier::PyGeneric>()?;
    m.add_class::<carrier::PyFileBacked>()?;
    m.add_class::<carrier::PyEvictable>()?;
    m.add_class::<tiled::PyTiledEvictable>()?;
    m.add_class::<tiled::PyTileState>()?;
    m.add_class::<carrier::PyCarrierFacet>()?;
    m.add_class::<tiled::PyTiledResidencyFacet>()?;
    m.add_class::<tiled::PyAwaitResidency>()?;
    m.add_class::<tiled::PyAwaitTensor>()?;
    m.add_class::<carrier::PyOperationCapability>()?;
    m.add_class::<gpu::PyMetal>()?;
    m.add_class::<gpu::PyGpu>()?;
    m.add_class::<gpu::PyGpuHost>()?;

    m.add_class::<authoring::PyStorageProvider>()?;
    m.add_class::<authoring::PyCarrierDefinition>()?;
    m.add_function(wrap_pyfunction!(authoring::register_carrier_definition, m)?)?;
    m.add_class::<legacy::PyOperation>()?;
    m.add_class::<autograd_context::PyAutogradContext>()?;
    m.add_class::<moves::PyMoveOperation>()?;
    m.add_class::<moves::PyElementwiseMoveOperation>()?;
    m.add_class::<moves::MoveOutput>()?;
    m.add_function(wrap_pyfunction!(moves::register_move_operation, m)?)?;
    m.add_function(wrap_pyfunction!(moves::unregister_move_operation, m)?)?;
    m.add_function(wrap_pyfunction!(moves::dispatch_move, m)?)?;
    for (name, class) in moves::shipped_route_classes(py) {
        m.add(name, class)?;
    }
    m.add_function(wrap_pyfunction!(
        capabilities::register_operation_capabilities,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        capabilities::capabilities_for_carrier_class,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(capabilities::matching_capability, m)?)?;
    m.add_function(wrap_pyfunction!(capabilities::supports_operation_plan, m)?)?;
    m.add_function(wrap_pyfunction!(capabilities::unsupported_plan_reason, m)?)?;
    m.add_function(wrap_pyfunction!(capabilities::require_capability, m)?)?;

    m.add_class::<tensor::PyTensor>()?;
    let (builtins, signatures) = tensor::builtin_signatures(py)?;
    m.add("BUILTIN_OPERATIONS", builtins)?;
    m.add("_BUILTIN_SIGNATURES", signatures)?;
    for function in [
        wrap_pyfunction!(tensor::neg, m)?,
        wrap_pyfunction!(tensor::abs, m)?,
        wrap_pyfunction!(tensor::exp, m)?,
        wrap_pyfunction!(tensor::log, m)?,
        wrap_pyfunction!(tensor::sqrt, m)?,
        wrap_pyfunction!(tensor::tanh, m)?,
        wrap_pyfunction!(tensor::sigmoid, m)?,
        wrap_pyfunction!(tensor::relu, m)?,
        wrap_pyfunction!(tensor::reduce_max, m)?,
        wrap_pyfunction!(tensor::add, m)?,
        wrap_pyfunction!(tensor::sub, m)?,
        wrap_pyfunction!(tensor::elementwise_mul, m)?,
        wrap_pyfunction!(tensor::div, m)?,
        wrap_pyfunction!(tensor::maximum, m)?,
        wrap_pyfunction!(tensor::minimum, m)?,
        wrap_pyfunction!(tensor::eq, m)?,
        wrap_pyfunction!(tensor::lt, m)?,
        wrap_pyfunction!(tensor::le, m)?,
        wrap_pyfunction!(tensor::mul, m)?,
        wrap_pyfunction!(tensor::select, m)?,
        wrap_pyfunction!(tensor::reduce_sum, m)?,
        wrap_pyfunction!(tensor::matmul, m)?,
        wrap_pyfunction!(tensor::grad, m)?,
        wrap_pyfunction!(autograd::no_grad, m)?,
        wrap_pyfunction!(autograd::set_grad_enabled, m)?,
        wrap_pyfunction!(autograd::is_grad_enabled, m)?,
        wrap_pyfunction!(movement::move_tensor, m)?,
        wrap_pyfunction!(movement::move_async, m)?,
        wrap_pyfunction!(movement::copy, m)?,
    ] {
        m.add_function(function)?;
    }
    m.add_class::<autograd::PyGradMode>()?;
    m.add_class::<movement::PyMoveHandle>()?;

    m.add_class::<numpy_interop::PyArrayView>()?;
    m.add_function(wrap_pyfunction!(numpy_interop::from_numpy, m)?)?;

    m.add_class::<residency::PyResidencyPlan>()?;
    m.add_class::<residency::PyResidencyPolicy>()?;
    m.add_class::<block_device::PyBlockDevice>()?;
    m.add_class::<block_device::PyBlockDeviceCarrier>()?;
    add_kernel_extension(m)?;
    m.add_class::<residency_progress::PyTileProgress>()?;
    add_custom_operations(m)?;
    m.add_function(wrap_pyfunction!(dlpack::from_dlpack, m)?)?;
    Ok(())
}

/// The kernel, transfer and composite halves of the carrier extension.
fn add_kernel_extension(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<invocation::PyOperationDefinition>()?;
    m.add_class::<invocation::PyResolvedInvocation>()?;
    m.add_class::<invocation::PyResultSpec>()?;
    m.add_function(wrap_pyfunction!(invocation::operation_definition, m)?)?;
    m.add_class::<prepared::PyUnsupported>()?;
    m.add_class::<prepared::PyProviderResult>()?;
    m.add_class::<kernels::PyKernelExecutionInterface>()?;
    m.add_class::<kernels::PyPreparedKernel>()?;
    m.add_class::<kernels::PyKernelPattern>()?;
    m.add_class::<kernels::PyKernelProvider>()?;
    m.add_class::<kernels::PyKernelPack>()?;
    m.add_function(wrap_pyfunction!(kernels::register_kernel_pack, m)?)?;
    m.add_class::<routes::PyTransferRequest>()?;
    m.add_class::<routes::PyPreparedTransfer>()?;
    m.add_class::<routes::PyTransferProvider>()?;
    m.add_class::<routes::PyTransferRoute>()?;
    m.add_class::<composite::PyDependentCarrier>()?;
    m.add_class::<composite::PyCompositeProvider>()?;
    m.add_class::<composite::PyPreparedComposite>()?;
    Ok(())
}

/// Custom operations with a Python backward rule.
fn add_custom_operations(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<custom_ops::PyOperandKind>()?;
    m.add_class::<custom_ops::PyArithmetic>()?;
    m.add_class::<custom_ops::PyAccumulation>()?;
    m.add_class::<custom_ops::PyMarker>()?;
    custom_ops::add_markers(m)?;
    m.add_class::<custom_ops::PyOperandSpec>()?;
    m.add_class::<custom_ops::PyOptionSpec>()?;
    m.add_class::<custom_ops::PyOperationSchema>()?;
    m.add_class::<custom_ops::PyOperandPlan>()?;
    m.add_class::<custom_ops::PyOperationPlan>()?;
    m.add_class::<planning::PyOperandRole>()?;
    m.add_class::<planning::PyOperandCapability>()?;
    m.add_function(wrap_pyfunction!(planning::resolve_operation_plan, m)?)?;
    m.add_function(wrap_pyfunction!(planning::_plan_signatures, m)?)?;
    m.add_class::<custom_ops::PyBoundOperationCall>()?;
    m.add_class::<custom_ops::PyVjpContext>()?;
    m.add_function(wrap_pyfunction!(custom_ops::define_operation, m)?)?;
    m.add_function(wrap_pyfunction!(custom_ops::call, m)?)?;
    Ok(())
}
