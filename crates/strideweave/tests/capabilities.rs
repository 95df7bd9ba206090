//! Class-level capability declaration (docs/carriers.md, Capabilities, and its
//! Worked examples item 8, the parts that do not need operation plans).

mod common;

use common::Composite;

type Flaky = common::Flaky<()>;
use strideweave::carrier::{
    capabilities_for_carrier_class, register_operation_capabilities, CarrierClass, ClassKind,
};
use strideweave::carriers::Generic;
use strideweave::operation::{Arithmetic, OperandCapability, OperationCapability};
use strideweave::{DType, ErrorKind};

fn relu(dtype: DType, compute: Arithmetic) -> OperationCapability {
    OperationCapability::new(
        "relu",
        [OperandCapability::tensor(dtype, dtype).unwrap()],
        compute,
        None,
        None,
        dtype,
    )
    .unwrap()
}

#[test]
fn a_duplicate_declaration_is_a_value_error_and_leaves_the_class_open() {
    let class = CarrierClass::mint("DuplicateTest", ClassKind::Independent);
    let f32_relu = relu(DType::FLOAT32, Arithmetic::Binary32);
    let error =
        register_operation_capabilities(class, [f32_relu.clone(), f32_relu.clone()]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error
        .to_string()
        .contains("duplicate capability for DuplicateTest: relu"));
    // Still open: a correct declaration succeeds, and is sorted (F32 before I32).
    let i32_relu = relu(DType::INT32, Arithmetic::Int32Exact);
    register_operation_capabilities(class, [i32_relu.clone(), f32_relu.clone()]).unwrap();
    assert_eq!(
        &*capabilities_for_carrier_class(class),
        &[f32_relu.clone(), i32_relu]
    );
    // A second declaration is a Type error and changes nothing.
    let error = register_operation_capabilities(class, []).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(capabilities_for_carrier_class(class).len(), 2);
}

#[test]
fn a_query_seals_an_undeclared_class_as_empty() {
    let class = CarrierClass::mint("ObservedTest", ClassKind::Independent);
    assert!(capabilities_for_carrier_class(class).is_empty());
    let error =
        register_operation_capabilities(class, [relu(DType::FLOAT32, Arithmetic::Binary32)])
            .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains(
        "ObservedTest was already observed: it was first observed without a declaration"
    ));
    assert!(capabilities_for_carrier_class(class).is_empty());
}

#[test]
fn dependent_and_shipped_classes_are_closed() {
    let error = register_operation_capabilities(CarrierClass::of::<Composite>(), []).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("dependent"));
    let error = register_operation_capabilities(CarrierClass::of::<Generic>(), []).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("closed shipped carrier class"));
    assert!(CarrierClass::of::<Generic>().is_shipped());
    assert!(!CarrierClass::of::<Flaky>().is_shipped());
}

#[test]
fn an_empty_declaration_is_valid() {
    let class = CarrierClass::mint("EmptyTest", ClassKind::Independent);
    register_operation_capabilities(class, []).unwrap();
    assert!(capabilities_for_carrier_class(class).is_empty());
}

#[test]
fn classes_are_exact_identities() {
    let a = CarrierClass::mint("Twin", ClassKind::Independent);
    let b = CarrierClass::mint("Twin", ClassKind::Independent);
    assert_ne!(a, b, "two run-time classes of one name are distinct");
    assert_eq!(CarrierClass::of::<Flaky>(), CarrierClass::of::<Flaky>());
    assert_ne!(CarrierClass::of::<Flaky>(), CarrierClass::of::<Generic>());
}

#[test]
fn capability_records_validate_and_describe_themselves() {
    let i32_relu = relu(DType::INT32, Arithmetic::Int32Exact);
    assert_eq!(
        i32_relu.to_string(),
        "relu with operands (tensor Int32->Int32), int32_exact compute, no accumulation, Int32 output"
    );
    let error =
        OperationCapability::new("relu", [], Arithmetic::Binary32, None, None, DType::FLOAT32)
            .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        OperandCapability::tensor(DType::ANY, DType::FLOAT32)
            .unwrap_err()
            .kind(),
        ErrorKind::Type
    );
    let weak = OperandCapability::weak_scalar(DType::FLOAT32).unwrap();
    assert_eq!(weak.dtype(), None);
}

#[test]
fn scenario_08_from_plan_matches_exactly_every_field() {
    use strideweave::operation::{resolve_operation_plan, PlanOperand};
    let f32_sum =
        resolve_operation_plan("reduce_sum", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap();
    let f64_sum = resolve_operation_plan(
        "reduce_sum",
        &[PlanOperand::Tensor(DType::FLOAT32)],
        Some(DType::FLOAT64),
    )
    .unwrap();
    let capability = OperationCapability::from_plan(f32_sum.clone());
    assert!(capability.matches(&f32_sum));
    assert!(
        !capability.matches(&f64_sum),
        "only the accumulator dtype differs"
    );
}

#[test]
fn scenario_08_both_reason_forms() {
    use strideweave::carrier::{
        require_capability, supports_operation_plan, unsupported_plan_reason,
    };
    use strideweave::operation::{resolve_operation_plan, PlanOperand};
    let class = CarrierClass::mint("ReasonTest", ClassKind::Independent);
    register_operation_capabilities(class, [relu(DType::FLOAT32, Arithmetic::Binary32)]).unwrap();
    let i32_relu =
        resolve_operation_plan("relu", &[PlanOperand::Tensor(DType::INT32)], None).unwrap();
    let f32_abs =
        resolve_operation_plan("abs", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap();
    assert!(!supports_operation_plan(class, &i32_relu));
    assert_eq!(
        unsupported_plan_reason(class, &i32_relu).unwrap(),
        "ReasonTest declares no operation-plan capability for this 'relu' plan: relu with operands (tensor Int32->Int32), int32_exact compute, no accumulation, Int32 output"
    );
    assert_eq!(
        unsupported_plan_reason(class, &f32_abs).unwrap(),
        "ReasonTest declares no operation-plan capability for 'abs'"
    );
    let error = require_capability(class, &i32_relu).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    match error {
        strideweave::Error::UnsupportedOperationPlan(plan) => {
            assert_eq!(plan.operation(), "relu");
            assert_eq!(plan.reasons().len(), 1);
        }
        other => panic!("expected UnsupportedOperationPlan, got {other:?}"),
    }
    let f32_relu =
        resolve_operation_plan("relu", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap();
    assert!(require_capability(class, &f32_relu)
        .unwrap()
        .matches(&f32_relu));
}

#[test]
fn shipped_compute_carriers_declare_every_builtin_and_file_backed_nothing() {
    use strideweave::carriers::{Cpu, FileBacked};
    use strideweave::operation::BUILTIN_OPERATIONS;
    let generic = capabilities_for_carrier_class(CarrierClass::of::<Generic>());
    let cpu = capabilities_for_carrier_class(CarrierClass::of::<Cpu>());
    assert_eq!(generic, cpu);
    for op in BUILTIN_OPERATIONS {
        assert!(generic.iter().any(|c| c.operation() == op), "{op}");
    }
    let relus: Vec<String> = generic
        .iter()
        .filter(|c| c.operation() == "relu")
        .map(|c| c.plan().output().name().to_string())
        .collect();
    assert_eq!(
        relus,
        ["Float32", "Int32"],
        "CPU relu gives [F32, I32] in order"
    );
    assert!(
        generic.windows(2).all(|w| w[0].cmp_order(&w[1]).is_lt()),
        "sorted and distinct"
    );
    assert!(capabilities_for_carrier_class(CarrierClass::of::<FileBacked>()).is_empty());
}
