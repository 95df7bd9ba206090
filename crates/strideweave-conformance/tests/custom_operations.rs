//! The custom-operation promises: a carrier advertising a custom operation runs it, through
//! the call its factory declares (`OperationCase`), against the declared or the definition's
//! reference on every layout, and its backward rule against finite differences; a wrong
//! kernel, a wrong backward rule, a missing case and a missing reference each break the
//! promise that names them.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::broken_message;
use common::one_kernel_carrier::Slots;

use strideweave::carrier::{Carrier, ClassKind};
use strideweave::operation::{
    call, define_operation, Arithmetic, BoundOperationCall, OperandKind, OperandPlan, OperandSpec,
    OperationCapability, OperationPlan, OperationSchema, ReferenceFn, ResolvedInvocation,
    ResultSpec, Vjp,
};
use strideweave::*;
use strideweave_conformance::{check, Factory, OperationCase, Promise, Verdict};

/// What to get wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    None,
    /// The kernel computes 3x where the operation means 2x.
    WrongKernel,
    /// The backward rule passes the cotangent through (gradient 1 where it is 2).
    WrongVjp,
    /// The definition has no reference (and the case gives none).
    NoReference,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The plan of a unary Float32 operation named `name`.
fn plan(name: &str) -> Result<OperationPlan> {
    OperationPlan::new(
        name,
        [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?],
        Arithmetic::Binary32,
        None,
        None,
        DType::FLOAT32,
    )
}

/// Defines a fresh `tests.scale2_<n>` (y = 2·x, differentiable) and a class whose one
/// kernel runs it; returns the operation's name and a factory of the class.
fn scale2(flaw: Flaw) -> Result<(String, Factory)> {
    let name = format!(
        "conformance_tests.scale2_{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let schema = OperationSchema::new([OperandSpec::new("x", OperandKind::Tensor, true)?], [])?;
    let resolve = |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?;
        let result = ResultSpec::canonical(DType::FLOAT32, x.shape().clone());
        ResolvedInvocation::new(
            call.clone(),
            plan(call.definition().name())?,
            [result],
            [],
            None,
        )
    };
    let reference: Option<Box<ReferenceFn>> = match flaw {
        Flaw::NoReference => None,
        _ => Some(Box::new(|invocation: &ResolvedInvocation| {
            let x = invocation.call().tensor(0)?;
            let doubled: Vec<f32> = x.to_f32_vec()?.iter().map(|v| 2.0 * v).collect();
            Ok(vec![Tensor::from_f32(&doubled, x.shape().clone())?])
        })),
    };
    let own = name.clone();
    let vjp = Vjp::rule(move |_, cotangents| {
        let g = cotangents[0]
            .clone()
            .ok_or_else(|| Error::Runtime("no cotangent".into()))?;
        if flaw == Flaw::WrongVjp {
            return Ok(vec![Some(g)]);
        }
        Ok(vec![Some(call(&own, [g.into()], &[])?.remove(0))])
    });
    define_operation(&name, schema, resolve, reference, vjp)?;

    let class = CarrierClass::mint("Scaler", ClassKind::Independent);
    let factor = if flaw == Flaw::WrongKernel { 3.0 } else { 2.0 };
    let kernel = KernelPattern::synchronous(
        [OperationCapability::from_plan(plan(&name)?)],
        "scaler.scale2",
        move |invocation, _| {
            let x = invocation.call().tensor(0)?.to_f32_vec()?;
            let y: Vec<f32> = x.iter().map(|v| factor * v).collect();
            Ok(vec![invocation.result_from_f32(0, &y)?])
        },
    )?;
    let definition = CarrierDefinition::new(StorageProvider::from_slots::<Slots>())
        .with_kernels(KernelProvider::with_default_interface([kernel])?)?;
    register_carrier_definition(class, definition)?;
    let factory = Factory::new(format!("Scaler ({flaw:?})"), move |dtype, values| {
        let carrier = Carrier::create(class, Slots::default(), values.len(), dtype, true)?;
        for (i, value) in values.iter().enumerate() {
            carrier.set(i, *value)?;
        }
        Ok(carrier)
    });
    Ok((name, factory))
}

/// A factory over `flaw` with the case `op(Float32 3×4)` declared.
fn declared(flaw: Flaw) -> (String, Factory) {
    let (name, factory) = scale2(flaw).unwrap();
    let case = OperationCase::new(&name).tensor(DType::FLOAT32, &[3, 4]);
    (name, factory.with_operation_case(case))
}

#[test]
fn an_advertised_custom_operation_runs_against_its_reference_and_its_gradient_is_checked() {
    let (name, factory) = declared(Flaw::None);
    let custom = check(&factory, Promise::CustomOperations);
    assert_eq!(custom.verdict, Verdict::Kept, "{custom:?}");
    assert_eq!(
        custom.notes,
        [format!(
            "ran {name} with operands (tensor Float32->Float32), binary32 compute, no accumulation, Float32 output through 1 declared case"
        )]
    );
    let gradients = check(&factory, Promise::Gradients);
    assert_eq!(gradients.verdict, Verdict::Kept, "{gradients:?}");
    assert!(
        gradients
            .notes
            .iter()
            .any(|n| n.starts_with(&format!("gradient of {name}"))
                && n.ends_with(&format!("through {name}(Float32 (3,4):(1,3)@0)"))),
        "{:?}",
        gradients.notes
    );
    // The built-in promises are untouched by the custom operation.
    assert_eq!(
        check(&factory, Promise::AdvertisedCapabilities).verdict,
        Verdict::Kept
    );
    assert_eq!(
        check(&factory, Promise::UnadvertisedPlans).verdict,
        Verdict::Kept
    );
}

#[test]
fn a_custom_kernel_with_wrong_values_breaks_the_custom_operation_promise() {
    let (name, factory) = declared(Flaw::WrongKernel);
    let message = broken_message(&factory, Promise::CustomOperations);
    assert!(
        message.starts_with(
            "broken promise 'custom operations match their reference': Scaler (WrongKernel): "
        ),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "{name}(Float32 (3,4):(1,3)@0) result 0 element 0 (colexicographic) is"
        )),
        "{message}"
    );
    assert!(message.contains("the declared reference"), "{message}");
    assert!(message.contains("how to read this:"), "{message}");
}

#[test]
fn a_wrong_backward_rule_breaks_the_gradient_promise() {
    let (name, factory) = declared(Flaw::WrongVjp);
    assert_eq!(
        check(&factory, Promise::CustomOperations).verdict,
        Verdict::Kept
    );
    let message = broken_message(&factory, Promise::Gradients);
    assert!(
        message.contains(&format!(
            "d(Σ w·{name}(Float32 (3,4):(1,3)@0))/d operand 0 element 0 (colexicographic) is"
        )),
        "{message}"
    );
    assert!(message.contains("by backward but"), "{message}");
}

#[test]
fn a_custom_operation_without_a_declared_case_breaks_the_promise() {
    let (name, factory) = scale2(Flaw::None).unwrap();
    let message = broken_message(&factory, Promise::CustomOperations);
    assert!(
        message.contains(&format!(
            "advertises {name} with operands (tensor Float32->Float32)"
        )),
        "{message}"
    );
    assert!(message.contains("a custom operation, but the factory declares no OperationCase whose call resolves to that plan (Factory::with_operation_case)"), "{message}");
}

#[test]
fn a_case_resolving_to_another_plan_does_not_count_and_a_missing_reference_is_named() {
    let (name, factory) = scale2(Flaw::NoReference).unwrap();
    let factory =
        factory.with_operation_case(OperationCase::new(&name).tensor(DType::FLOAT32, &[5]));
    let message = broken_message(&factory, Promise::CustomOperations);
    assert!(message.contains(&format!("{name}(Float32 5:1@0): neither the declared case nor the definition of '{name}' gives a reference")), "{message}");
    // The case's own reference is enough.
    let (name, factory) = scale2(Flaw::NoReference).unwrap();
    let case = OperationCase::new(&name)
        .tensor(DType::FLOAT32, &[2, 3])
        .reference(|invocation| {
            let x = invocation.call().tensor(0)?;
            let doubled: Vec<f32> = x.to_f32_vec()?.iter().map(|v| 2.0 * v).collect();
            Ok(vec![Tensor::from_f32(&doubled, x.shape().clone())?])
        });
    let factory = factory.with_operation_case(case);
    assert_eq!(
        check(&factory, Promise::CustomOperations).verdict,
        Verdict::Kept
    );
}
