//! The carrier author's conformance suite (`strideweave-conformance`) over the Gpu carrier:
//! storage, dtype answers, every advertised JIT kernel against the Generic reference,
//! refusals, the Gpu → CPU route and gradients. Like the other Gpu tests, each prints
//! `SKIPPED:` with the reason where the machine has no adapter (CI installs llvmpipe).

mod common;

use strideweave::{Carrier, DType, Value};
use strideweave_conformance::{assert_promise, Factory, Promise};
use strideweave_wgpu::Gpu;

/// A factory of Gpu carriers holding the given values, written slot by slot through the
/// class's storage provider.
fn factory(gpu: Gpu) -> Factory {
    Factory::new(
        "Gpu",
        move |dtype: DType, values: &[Value]| -> strideweave::Result<Carrier> {
            let carrier = gpu.carrier(values.len(), dtype)?;
            for (i, value) in values.iter().enumerate() {
                carrier.set(i, *value)?;
            }
            Ok(carrier)
        },
    )
}

fn promise(test: &str, promise: Promise) {
    if let Some(gpu) = common::shared_gpu(test) {
        assert_promise(&factory(gpu), promise);
    }
}

#[test]
fn gpu_storage_reads() {
    promise("gpu_storage_reads", Promise::StorageReads);
}

#[test]
fn gpu_storage_writes_and_versions() {
    promise("gpu_storage_writes_and_versions", Promise::StorageWrites);
}

#[test]
fn gpu_storage_release() {
    promise("gpu_storage_release", Promise::StorageRelease);
}

#[test]
fn gpu_storage_factories() {
    promise("gpu_storage_factories", Promise::StorageFactories);
}

#[test]
fn gpu_dtype_answers_by_identity() {
    promise("gpu_dtype_answers_by_identity", Promise::DtypeAnswers);
}

#[test]
fn gpu_advertised_capabilities_execute() {
    promise(
        "gpu_advertised_capabilities_execute",
        Promise::AdvertisedCapabilities,
    );
}

#[test]
fn gpu_custom_operations_match_their_reference() {
    promise(
        "gpu_custom_operations_match_their_reference",
        Promise::CustomOperations,
    );
}

#[test]
fn gpu_unadvertised_plans_are_refused() {
    promise(
        "gpu_unadvertised_plans_are_refused",
        Promise::UnadvertisedPlans,
    );
}

#[test]
fn gpu_failures_publish_nothing() {
    promise("gpu_failures_publish_nothing", Promise::FailureAtomicity);
}

#[test]
fn gpu_moves_to_and_from_the_cpu() {
    promise("gpu_moves_to_and_from_the_cpu", Promise::CpuMoves);
}

#[test]
fn gpu_gradients_match_finite_differences() {
    promise("gpu_gradients_match_finite_differences", Promise::Gradients);
}

#[test]
fn gpu_scatter_writes_exactly_its_slots() {
    promise("gpu_scatter_writes_exactly_its_slots", Promise::Scatter);
}

#[test]
fn gpu_asynchronous_moves_complete_once() {
    promise("gpu_asynchronous_moves_complete_once", Promise::AsyncMoves);
}

#[test]
fn gpu_kernel_packs_are_selected_in_order() {
    promise(
        "gpu_kernel_packs_are_selected_in_order",
        Promise::KernelPacks,
    );
}

#[test]
fn gpu_facets_are_found_by_exact_type() {
    promise("gpu_facets_are_found_by_exact_type", Promise::Facets);
}
