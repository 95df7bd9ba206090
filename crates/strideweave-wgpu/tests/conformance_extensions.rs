//! The conformance suite's extension promises over the Gpu carrier with what its factory
//! declares: the `GpuUpload` facet its definition registers, found by exact type in every
//! state, and kernel packs selected in order on a fresh Gpu class (each `Gpu::define` mints
//! one, which packs may attach to until it is observed). Each test prints `SKIPPED:` with the
//! reason where the machine has no adapter (CI installs llvmpipe).

mod common;

use std::sync::Arc;

use strideweave::{Carrier, DType, Result, Value};
use strideweave_conformance::{check, Factory, Promise, Verdict};
use strideweave_wgpu::{Gpu, GpuUpload};

/// A Gpu carrier of `gpu`'s class holding `values`, written slot by slot.
fn carrier(gpu: &Gpu, dtype: DType, values: &[Value]) -> Result<Carrier> {
    let carrier = gpu.carrier(values.len(), dtype)?;
    for (i, value) in values.iter().enumerate() {
        carrier.set(i, *value)?;
    }
    Ok(carrier)
}

/// A factory over `gpu`'s class declaring its facet, whose kernel-pack check defines a fresh
/// Gpu class on the same device.
fn factory(gpu: Gpu) -> Factory {
    let device = Arc::clone(gpu.device());
    Factory::new("Gpu", move |dtype, values| carrier(&gpu, dtype, values))
        .with_facet::<GpuUpload>()
        .with_fresh_class(move || {
            let fresh = Gpu::define(Arc::clone(&device))?;
            let class = fresh.class();
            let factory = Factory::new("Gpu (fresh)", move |dtype, values| {
                carrier(&fresh, dtype, values)
            });
            Ok((class, factory))
        })
}

#[test]
fn the_gpu_upload_facet_is_found_by_its_exact_type_in_every_state() {
    let Some(gpu) =
        common::shared_gpu("the_gpu_upload_facet_is_found_by_its_exact_type_in_every_state")
    else {
        return;
    };
    let outcome = check(&factory(gpu), Promise::Facets);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert_eq!(
        outcome.notes,
        [
            "1 declared facets found by exact type in 5 states; an unregistered facet type \
             answered none"
        ]
    );
}

#[test]
fn a_fresh_gpu_class_selects_the_suites_kernel_packs_in_order() {
    let Some(gpu) =
        common::shared_gpu("a_fresh_gpu_class_selects_the_suites_kernel_packs_in_order")
    else {
        return;
    };
    let outcome = check(&factory(gpu), Promise::KernelPacks);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert_eq!(
        outcome.notes,
        [
            "three packs on the fresh Gpu: the declining one passed on, the first accepting \
             one in (namespace, version) order ran on 3 calls, another class's pack never ran"
        ]
    );
}
