//! Operation definitions, schemas, binding and resolution (docs/operations.md,
//! Operation definitions, and its Worked examples item 18).

use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, define_operation, operation_definition, Arithmetic, BoundOperationCall, OperandKind,
    OperandPlan, OperandSpec, OperationPlan, OperationSchema, OptionSpec, OptionValue,
    ResolvedInvocation, ResultSpec, Vjp,
};
use strideweave::{DType, ErrorKind, Result, Shape, Tensor};

fn unary_schema() -> OperationSchema {
    OperationSchema::new(
        [OperandSpec::new("x", OperandKind::Tensor, true).unwrap()],
        [],
    )
    .unwrap()
}

/// Resolves a call of a unary Float32 custom operation to a same-shaped Float32 result.
fn resolve_same(call: &BoundOperationCall) -> Result<ResolvedInvocation> {
    let x = call.tensor(0)?;
    let plan = OperationPlan::new(
        call.definition().name(),
        [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?],
        Arithmetic::Binary32,
        None,
        None,
        DType::FLOAT32,
    )?;
    let result = ResultSpec::canonical(DType::FLOAT32, x.shape().clone());
    ResolvedInvocation::new(call.clone(), plan, [result], [0], None)
}

#[test]
fn scenario_18_custom_names_are_namespaced_unique_and_need_a_vjp_decision() {
    for bad in [
        "foo",
        "add.x",
        "strideweave.x",
        "my lib.x",
        "mylib..x",
        "mylib.1x",
    ] {
        let error = define_operation(
            bad,
            unary_schema(),
            resolve_same,
            None,
            Vjp::NonDifferentiable,
        )
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value, "{bad}");
    }
    let defined = define_operation(
        "scenario18.double",
        unary_schema(),
        resolve_same,
        None,
        Vjp::rule(|_, _| Ok(vec![None])),
    )
    .unwrap();
    assert_eq!(defined.name(), "scenario18.double");
    assert!(!defined.is_builtin());
    assert!(matches!(defined.vjp(), Some(Vjp::Rule(_))));
    assert!(operation_definition("scenario18.double")
        .unwrap()
        .same_as(&defined));
    let duplicate = define_operation(
        "scenario18.double",
        unary_schema(),
        resolve_same,
        None,
        Vjp::NonDifferentiable,
    );
    assert_eq!(duplicate.unwrap_err().kind(), ErrorKind::Value);
    // "Omitted vjp" cannot be written: `vjp` is a required parameter of type `Vjp`.
}

#[test]
fn scenario_18_operand_and_result_specs_validate() {
    let error = OperandSpec::new("x", OperandKind::WeakScalar, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        OperandSpec::new("1x", OperandKind::Tensor, false)
            .unwrap_err()
            .kind(),
        ErrorKind::Value
    );
    let layout = "(2,3):(1,2)".parse().unwrap();
    let spec = ResultSpec::new(DType::FLOAT32, layout);
    assert_eq!(
        spec.clone()
            .with_tolerance(f64::NAN, 0.0)
            .unwrap_err()
            .kind(),
        ErrorKind::Value
    );
    assert_eq!(
        spec.clone().with_tolerance(-1.0, 0.0).unwrap_err().kind(),
        ErrorKind::Value
    );
    assert_eq!(spec.with_tolerance(1e-6, 1e-5).unwrap().atol(), 1e-6);
    let twice = OperationSchema::new(
        [OperandSpec::new("x", OperandKind::Tensor, true).unwrap()],
        [OptionSpec::new("x", None).unwrap()],
    );
    assert_eq!(twice.unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(
        OperationSchema::new([], []).unwrap_err().kind(),
        ErrorKind::Value
    );
}

#[test]
fn kernel_id_defaults_to_the_name_and_binding_checks_kinds_and_options() {
    let x = Tensor::compact(
        Cpu::from_f32(&[1.0, 2.0], true).unwrap(),
        Shape::new(2).unwrap(),
    )
    .unwrap();
    let definition = operation_definition("reduce_sum").unwrap();
    let bound = definition
        .bind(vec![x.clone().unsqueeze(0).unwrap().into()], &[])
        .unwrap();
    assert_eq!(bound.option("accumulator_dtype"), Some(OptionValue::None));
    let invocation = definition.resolve(&bound).unwrap();
    assert_eq!(invocation.kernel_id(), "reduce_sum");
    assert_eq!(invocation.results()[0].shape(), &Shape::new(1).unwrap());

    let error = definition
        .bind(vec![x.clone().into(), x.clone().into()], &[])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error
        .to_string()
        .contains("'reduce_sum' takes 1 operands, got 2"));
    let error = definition.bind(vec![1.5.into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    let error = definition
        .bind(vec![x.clone().into()], &[("precision", OptionValue::None)])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("has no option 'precision'"));
    let error = call(
        "relu",
        [x.into()],
        &[("accumulator_dtype", OptionValue::DType(DType::FLOAT64))],
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
}

#[test]
fn a_custom_operation_runs_only_where_a_carrier_declares_it() {
    let defined = define_operation(
        "custom.identity",
        unary_schema(),
        resolve_same,
        None,
        Vjp::NonDifferentiable,
    )
    .unwrap();
    let x = Tensor::compact(Cpu::from_f32(&[1.0], true).unwrap(), Shape::new(1).unwrap()).unwrap();
    let error = defined.call(vec![x.into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        error.to_string(),
        "unsupported operation plan for 'custom.identity': CPU declares no operation-plan capability for 'custom.identity'"
    );
}

#[test]
fn a_resolver_must_resolve_its_own_call() {
    let hijack = |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?.clone();
        let relu = operation_definition("relu")?;
        relu.resolve(&relu.bind(vec![x.into()], &[])?)
    };
    let defined = define_operation(
        "custom.hijack",
        unary_schema(),
        hijack,
        None,
        Vjp::NonDifferentiable,
    )
    .unwrap();
    let x = Tensor::compact(Cpu::from_f32(&[1.0], true).unwrap(), Shape::new(1).unwrap()).unwrap();
    let error = defined.call(vec![x.into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error
        .to_string()
        .contains("returned an invocation of 'relu'"));
}

#[test]
fn a_hostile_name_is_quoted_escaped_and_cut_in_errors() {
    let name = format!("evil\n\u{1b}[2J{}", "x".repeat(10_000));
    let error = operation_definition(&name).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        error.to_string(),
        format!(
            "not implemented: no operation named 'evil\\n\\u{{1b}}[2J{}'… (10009 characters) is \
             defined",
            "x".repeat(55)
        )
    );
    let error = DType::from_name(&name).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Lookup);
    assert!(
        error
            .to_string()
            .ends_with("'… (10009 characters) is registered"),
        "{error}"
    );
    assert!(!error.to_string().contains('\n'));
}
