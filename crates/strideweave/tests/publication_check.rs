//! The publication check at the framework's trust boundary: a third-party definition-free
//! class's built-in kernel function is checked result by result exactly like a provider (its
//! results are published only when they match their specifications), while the framework's own
//! kernels on shipped classes build every result from its specification and still have the
//! result count and the operand versions checked.

use std::sync::{Mutex, Once};

use strideweave::carrier::{
    constructed_on_this_thread, register_operation_capabilities, CarrierClass,
    DefinitionFreeCarrier,
};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, resolve_operation_plan, Builtin, BuiltinKernel, OperationCapability, PlanOperand,
    ResolvedInvocation,
};
use strideweave::{Carrier, DType, Error, Result, Shape, Tensor, Value};

/// How the built-in kernel of [`Crooked`] shapes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// The result its specification asks for.
    None,
    /// The result transposed: same shape family, another layout.
    Layout,
    /// Int32 where the plan says Float32.
    Dtype,
    /// The operand object itself.
    Operand,
}

/// A third-party definition-free carrier (its origin is not shipped) whose `neg` is a
/// built-in kernel function.
#[derive(Debug)]
struct Crooked {
    values: Mutex<Vec<Value>>,
    flaw: Flaw,
}

impl DefinitionFreeCarrier for Crooked {
    const NAME: &'static str = "Crooked";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32 || dtype == DType::INT32
    }
    fn size(&self) -> usize {
        self.values.lock().unwrap().len()
    }
    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        Ok(self.values.lock().unwrap()[index])
    }
    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.values.lock().unwrap()[index] = value;
        Ok(())
    }
    fn release(&self) -> Result<()> {
        self.values.lock().unwrap().clear();
        Ok(())
    }
    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Crooked {
            values: Mutex::new(values.to_vec()),
            flaw: self.flaw,
        })
    }
    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(Crooked {
            values: Mutex::new(vec![Value::Float(0.0); size]),
            flaw: self.flaw,
        })
    }
    fn builtin_kernel(&self) -> Option<BuiltinKernel> {
        Some(crooked_neg)
    }
}

/// `neg` on a [`Crooked`] tensor, with its carrier's flaw.
fn crooked_neg(_builtin: Builtin, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let input = invocation.call().tensor(0)?.clone();
    let flaw = input
        .carrier()
        .downcast_ref::<Crooked>()
        .map_or(Flaw::None, |c| c.flaw);
    if flaw == Flaw::Operand {
        return Ok(input);
    }
    let values: Vec<Value> = input
        .to_values()?
        .into_iter()
        .map(|v| Value::Float(-v.as_f64().unwrap_or(0.0)))
        .collect();
    let spec = &invocation.results()[0];
    let dtype = if flaw == Flaw::Dtype {
        DType::INT32
    } else {
        spec.dtype()
    };
    let values: Vec<Value> = if dtype == DType::INT32 {
        values
            .iter()
            .map(|v| Value::Int(v.as_f64().unwrap_or(0.0) as i64))
            .collect()
    } else {
        values
    };
    let carrier = input.carrier().new_like(&values, true, Some(dtype))?;
    let layout = if flaw == Flaw::Layout {
        "(2,2):(2,1)".parse()?
    } else {
        spec.layout().clone()
    };
    Tensor::new(carrier, 0, layout)
}

fn crooked(flaw: Flaw) -> Tensor {
    static DECLARE: Once = Once::new();
    DECLARE.call_once(|| {
        let plan =
            resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap();
        register_operation_capabilities(
            CarrierClass::of::<Crooked>(),
            [OperationCapability::from_plan(plan)],
        )
        .unwrap();
    });
    let body = Crooked {
        values: Mutex::new([1.0, -2.0, 3.0, -4.0].map(Value::Float).to_vec()),
        flaw,
    };
    let carrier = Carrier::new(body, DType::FLOAT32, true).unwrap();
    Tensor::compact(carrier, Shape::new((2, 2)).unwrap()).unwrap()
}

#[test]
fn a_third_party_kernel_function_that_keeps_the_contract_publishes_its_result() {
    assert!(!CarrierClass::of::<Crooked>().is_shipped());
    let x = crooked(Flaw::None);
    let y = call("neg", [x.clone().into()], &[]).unwrap();
    assert_eq!(
        y[0].to_values().unwrap(),
        [1.0, -2.0, 3.0, -4.0].map(|v: f64| Value::Float(-v))
    );
    assert_eq!(x.version(), 0);
}

#[test]
fn a_third_party_kernel_functions_results_are_checked_like_a_providers() {
    let cases = [
        (
            Flaw::Layout,
            "provider contract violated: 'neg' on Crooked: result 0 has layout (2,2):(2,1) at \
             offset 0, expected (2,2):(1,2) at offset 0",
        ),
        (
            Flaw::Dtype,
            "provider contract violated: 'neg' on Crooked: result 0 has dtype Int32, expected \
             Float32",
        ),
        (
            Flaw::Operand,
            "provider contract violated: 'neg' on Crooked: result 0 shares storage with operand 0, \
             which its spec does not declare with alias_of",
        ),
    ];
    for (flaw, message) in cases {
        let x = crooked(flaw);
        let error = call("neg", [x.clone().into()], &[]).unwrap_err();
        assert!(
            matches!(error, Error::ProviderContract(_)),
            "{flaw:?}: {error:?}"
        );
        assert_eq!(error.to_string(), message, "{flaw:?}");
        assert_eq!(x.version(), 0, "{flaw:?}");
        assert_eq!(
            x.to_values().unwrap(),
            [1.0, -2.0, 3.0, -4.0].map(Value::Float),
            "{flaw:?}"
        );
    }
}

#[test]
fn the_shipped_cpu_kernels_results_match_their_specifications_without_the_per_result_check() {
    assert!(CarrierClass::of::<Cpu>().is_shipped());
    let x = Tensor::compact(
        Cpu::from_f32(&[1.0, -2.0, 3.0, -4.0], true).unwrap(),
        Shape::new((2, 2)).unwrap(),
    )
    .unwrap();
    let transposed = Tensor::new(x.carrier().clone(), 0, "(2,2):(2,1)".parse().unwrap()).unwrap();
    for operand in [&x, &transposed] {
        let before = constructed_on_this_thread();
        let y = call("neg", [operand.clone().into()], &[]).unwrap();
        assert_eq!(constructed_on_this_thread(), before + 1);
        assert_eq!(y.len(), 1);
        let y = &y[0];
        // What the per-result check would have asked: the class, dtype, canonical layout at
        // offset 0, exactly cosize slots, and a fresh object.
        assert_eq!(y.carrier().class(), CarrierClass::of::<Cpu>());
        assert_eq!(y.dtype(), DType::FLOAT32);
        assert_eq!(y.layout().to_string(), "(2,2):(1,2)");
        assert_eq!(y.offset(), 0);
        assert_eq!(y.carrier().size(), 4);
        assert!(!y.same_as(operand));
        assert_eq!(y.version(), 0);
        let expected: Vec<Value> = operand
            .to_values()
            .unwrap()
            .into_iter()
            .map(|v| Value::Float(-v.as_f64().unwrap()))
            .collect();
        assert_eq!(y.to_values().unwrap(), expected);
    }
}
