//! The JIT kernel patterns of the Gpu class.
//!
//! Every built-in the class executes has two patterns on the same plans:
//!
//! - **compact** (`wgpu.<op>.compact`, preference 10): operands and result addressed by
//!   ordinal (elementwise: every operand, after broadcasting, maps ordinal `i` to slot
//!   `offset + i`; reductions and `matmul`: column-major operands). Its shader depends only on
//!   the operation and dtype, so one compiled pipeline serves every shape. Any other layout
//!   is declined with `Unsupported`, and the next pattern prepares.
//! - **strided** (`wgpu.<op>.strided`, preference 0): any layout. Its shader bakes every
//!   operand's coalesced leaves (extents and strides) into the code, so it is compiled per
//!   layout signature.
//!
//! Preparation generates the WGSL for the invocation and fetches its pipeline from the
//! device's cache, compiling it on the first use of a specialization key: a later invocation
//! with the same key is the seed's "precompiled kernel through the same boundary". Submission
//! allocates the result buffer, encodes one dispatch and returns a pending completion of the
//! queue submission; the result carrier is built only once the work finished.

mod launch;
pub(crate) mod wgsl;

use strideweave::carriers::extension::{KernelPattern, Preparation, Unsupported};
use strideweave::operation::{
    operation_definition, resolve_operation_plan, Arithmetic, OperationCapability, OperationPlan,
    PlanOperand, ResolvedInvocation,
};
use strideweave::{DType, Error, Layout, Result, Value};

use crate::storage::SLOT_BYTES;
use launch::{launch, Checked, Launch, Sink, Source};
use wgsl::{Access, Accumulator, Input, Scalar, TreeInput, TreeOutput};
pub(crate) use wgsl::{LOOP_BOUND, TREE_FROM};

use crate::carrier::GpuInterface;
use crate::reduction_rule::ReductionRule;

/// What a built-in computes on the Gpu.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Elementwise, with the WGSL expression of `a` (and `b`).
    Elementwise(&'static str),
    /// `reduce_sum` (false) or `reduce_max` (true) over mode 1.
    Reduce(bool),
    /// `matmul`.
    Matmul,
}

/// The Int32 form of an elementwise kernel: its WGSL expression of `a` (and `b`) in wrapping
/// i32 arithmetic, and for a checked plan the WGSL condition on `a`, `b` and the wrapped
/// result `r` under which the exact result left the Int32 range.
#[derive(Debug, Clone, Copy)]
struct IntKernel {
    expr: &'static str,
    overflow: Option<&'static str>,
}

const fn exact(expr: &'static str) -> Option<IntKernel> {
    Some(IntKernel {
        expr,
        overflow: None,
    })
}

const fn checked(expr: &'static str, overflow: &'static str) -> Option<IntKernel> {
    Some(IntKernel {
        expr,
        overflow: Some(overflow),
    })
}

/// i32 multiplication overflowed: the wrapped product divided back differs, or the one case
/// WGSL's division maps to itself (`i32::MIN / -1`).
const MUL_OVERFLOW: &str =
    "b != 0 && ((a == -2147483647 - 1 && b == -1) || (b == -2147483647 - 1 && a == -1) || r / b != a)";

/// The built-ins the Gpu executes: name, arity, Float32 expression and Int32 kernel.
const ELEMENTWISE: &[(&str, usize, &str, Option<IntKernel>)] = &[
    ("neg", 1, "-a", checked("-a", "a == -2147483647 - 1")),
    (
        "abs",
        1,
        "bitcast<f32>(bitcast<u32>(a) & 0x7fffffffu)",
        checked("abs(a)", "a == -2147483647 - 1"),
    ),
    (
        "relu",
        1,
        "select(select(0.0, a, a > 0.0), a, is_nan(a))",
        exact("max(a, 0)"),
    ),
    ("exp", 1, "exp(a)", None),
    ("log", 1, "log(a)", None),
    ("sqrt", 1, "sqrt(a)", None),
    ("tanh", 1, "tanh(a)", None),
    ("sigmoid", 1, "1.0 / (1.0 + exp(-a))", None),
    (
        "add",
        2,
        "a + b",
        checked("a + b", "((a ^ r) & (b ^ r)) < 0"),
    ),
    (
        "sub",
        2,
        "a - b",
        checked("a - b", "((a ^ b) & (a ^ r)) < 0"),
    ),
    ("mul", 2, "a * b", checked("a * b", MUL_OVERFLOW)),
    (
        "elementwise_mul",
        2,
        "a * b",
        checked("a * b", MUL_OVERFLOW),
    ),
    ("div", 2, "a / b", None),
    ("maximum", 2, "fmax(a, b)", exact("max(a, b)")),
    ("minimum", 2, "fmin(a, b)", exact("min(a, b)")),
    (
        "eq",
        2,
        "select(0u, 1u, a == b)",
        exact("select(0u, 1u, a == b)"),
    ),
    (
        "lt",
        2,
        "select(0u, 1u, a < b)",
        exact("select(0u, 1u, a < b)"),
    ),
    (
        "le",
        2,
        "select(0u, 1u, a <= b)",
        exact("select(0u, 1u, a <= b)"),
    ),
];

/// `select(cond, a, b)` on the words: the condition's Bool word picks `b` (the inputs are
/// named `a`, `b`, `c` in operand order).
const SELECT: &str = "select(c, b, a != 0u)";

/// The built-ins whose Bool tensors the Gpu also compares (their Int32 expression on the
/// Bool words, 0 and 1).
const ON_BOOL: &[&str] = &["eq"];

/// Every kernel pattern of the Gpu class, compact before strided for each built-in; with
/// `float64` (the device computes in binary64) `reduce_sum` and `matmul` also take the
/// Float32 plans accumulating in Float64.
pub(crate) fn patterns(float64: bool) -> Result<Vec<KernelPattern>> {
    let mut patterns = Vec::new();
    for &(name, arity, float, int) in ELEMENTWISE {
        let mut plans = operand_plans(name, arity, DType::FLOAT32, true, false, None)?;
        if let Some(kernel) = int {
            plans.extend(operand_plans(
                name,
                arity,
                DType::INT32,
                true,
                kernel.overflow.is_some(),
                None,
            )?);
        }
        if ON_BOOL.contains(&name) {
            plans.extend(operand_plans(name, arity, DType::BOOL, true, false, None)?);
        }
        plans.extend(converting_plans(name, arity)?);
        add_pair(&mut patterns, name, plans, Kind::Elementwise(float), int)?;
    }
    let accumulating = |name, arity| -> Result<Vec<OperationCapability>> {
        let mut plans = operand_plans(name, arity, DType::FLOAT32, false, false, None)?;
        plans.extend(operand_plans(name, arity, DType::INT32, false, true, None)?);
        if float64 {
            plans.extend(operand_plans(
                name,
                arity,
                DType::FLOAT32,
                false,
                false,
                Some(DType::FLOAT64),
            )?);
        }
        Ok(plans)
    };
    add_pair(
        &mut patterns,
        "select",
        select_plans()?,
        Kind::Elementwise(SELECT),
        exact(SELECT),
    )?;
    let plans = accumulating("reduce_sum", 1)?;
    add_pair(
        &mut patterns,
        "reduce_sum",
        plans,
        Kind::Reduce(false),
        None,
    )?;
    let mut plans = operand_plans("reduce_max", 1, DType::FLOAT32, false, false, None)?;
    plans.extend(operand_plans(
        "reduce_max",
        1,
        DType::INT32,
        false,
        false,
        None,
    )?);
    add_pair(&mut patterns, "reduce_max", plans, Kind::Reduce(true), None)?;
    let mut plans = accumulating("matmul", 2)?;
    let float_plans: Vec<OperationCapability> = plans
        .iter()
        .filter(|plan| plan.plan().output() == DType::FLOAT32)
        .cloned()
        .collect();
    patterns.push(tiled_matmul(float_plans)?);
    plans.extend(mixed_products(float64)?);
    add_pair(&mut patterns, "matmul", plans, Kind::Matmul, None)?;
    Ok(patterns)
}

/// The workgroup-tiled `matmul` pattern (`wgpu.matmul.tiled`, preference 20, before the
/// compact and strided ones) on the Float32 `plans`: compact column-major operands and
/// result, a contracted mode of at most [`wgsl::TILED_LONGEST`] elements, and a device whose
/// [`GpuDevice::workgroup_tiles`](crate::GpuDevice::workgroup_tiles) is on; it declines
/// anything else with `Unsupported`, and the general patterns run it.
fn tiled_matmul(plans: Vec<OperationCapability>) -> Result<KernelPattern> {
    KernelPattern::new(
        &operation_definition("matmul")?,
        plans,
        "wgpu.matmul.tiled",
        move |invocation, interface| {
            let enabled = interface
                .downcast_ref::<GpuInterface>()
                .is_some_and(|gpu| gpu.device().workgroup_tiles());
            if !enabled {
                return Ok(Preparation::Unsupported(Unsupported::new(
                    "workgroup tiles are off on this device",
                )?));
            }
            match specialize_tiled(invocation)? {
                Err(reason) => Ok(Preparation::Unsupported(Unsupported::new(reason)?)),
                Ok(work) => launch(work, interface.clone()),
            }
        },
        20,
    )
}

/// The launch of a workgroup-tiled `matmul` ([`wgsl::matmul_tiled`]), or why it declines.
fn specialize_tiled(
    invocation: &ResolvedInvocation,
) -> Result<std::result::Result<Launch, String>> {
    let name = "matmul";
    let spec = &invocation.results()[0];
    let lhs = invocation.call().tensor(0)?;
    let rhs = invocation.call().tensor(1)?;
    if lhs.dtype() != DType::FLOAT32 || rhs.dtype() != DType::FLOAT32 {
        return Ok(Err(format!(
            "workgroup tiles multiply Float32 operands, not {} and {}",
            lhs.dtype(),
            rhs.dtype()
        )));
    }
    let (lhs_rows, lhs_inner) = two_modes(name, lhs.layout())?;
    let (rhs_rows, rhs_inner) = two_modes(name, rhs.layout())?;
    let (n, m, k) = (lhs_rows.size(), rhs_rows.size(), lhs_inner.size());
    let compact = is_scaled(&lhs_rows, 1)
        && is_scaled(&lhs_inner, n)
        && is_scaled(&rhs_rows, 1)
        && is_scaled(&rhs_inner, m)
        && is_scaled(spec.layout(), 1);
    if !compact {
        return Ok(Err(format!(
            "workgroup tiles need column-major operands and result, got {} and {}",
            lhs.layout(),
            rhs.layout()
        )));
    }
    if k > wgsl::TILED_LONGEST {
        return Ok(Err(format!(
            "workgroup tiles contract at most {} elements, not {k}",
            wgsl::TILED_LONGEST
        )));
    }
    let accumulator = accumulator_of(Scalar::F32, invocation);
    let (row_tiles, column_tiles) = (n.div_ceil(wgsl::TILE), m.div_ceil(wgsl::TILE));
    let mut work = Launch::new(name, spec.clone());
    work.bind(lhs)?;
    work.bind(rhs)?;
    work.add_pass(
        (Source::Operands, Sink::Result),
        [n, m, k, column_tiles],
        row_tiles * column_tiles * wgsl::WORKGROUP as usize,
        format!("matmul_tiled|f32|{}", accumulator.key()),
        move |windows| wgsl::matmul_tiled(accumulator, windows),
    )?;
    Ok(Ok(work))
}

/// The capabilities of `name` on `dtype` tensors (and, with `scalars`, each weak-scalar
/// form of a binary operation, the scalar of the tensors' kind), resolved with
/// `accumulator` as the `accumulator_dtype` option, whose arithmetic the shaders compute
/// exactly as the plan says: binary32, Int32 that cannot overflow, or (with
/// `overflow_checked`) checked Int32. A form the operation refuses with that accumulator
/// (an Int32 plan takes none) is left out.
fn operand_plans(
    name: &str,
    arity: usize,
    dtype: DType,
    scalars: bool,
    overflow_checked: bool,
    accumulator: Option<DType>,
) -> Result<Vec<OperationCapability>> {
    let tensor = PlanOperand::Tensor(dtype);
    let scalar = PlanOperand::Scalar(weak_scalar(dtype));
    let mut forms = vec![vec![tensor; arity]];
    if scalars && arity == 2 {
        forms.push(vec![tensor, scalar]);
        forms.push(vec![scalar, tensor]);
    }
    let mut plans = Vec::new();
    for form in forms {
        // Forms the operation does not accept (a scalar where it takes none) are skipped.
        let Ok(plan) = resolve_operation_plan(name, &form, accumulator) else {
            continue;
        };
        if executable(&plan, dtype, overflow_checked, 0) {
            plans.push(OperationCapability::from_plan(plan));
        }
    }
    Ok(plans)
}

/// The Float32 plans of `name` that convert an Int32 tensor operand to Float32 (an Int32
/// tensor against a Float32 tensor or a float scalar, or an operation that always computes in
/// Float32 on Int32 tensors): the shaders convert each element exactly as the CPU does.
fn converting_plans(name: &str, arity: usize) -> Result<Vec<OperationCapability>> {
    let (int, float) = (
        PlanOperand::Tensor(DType::INT32),
        PlanOperand::Tensor(DType::FLOAT32),
    );
    let scalar = PlanOperand::Scalar(Value::Float(1.0));
    let forms: Vec<Vec<PlanOperand>> = if arity == 1 {
        vec![vec![int]]
    } else {
        vec![
            vec![int, float],
            vec![float, int],
            vec![int, int],
            vec![int, scalar],
            vec![scalar, int],
        ]
    };
    Ok(forms
        .into_iter()
        .filter_map(|form| resolve_operation_plan(name, &form, None).ok())
        .filter(|plan| executable(plan, DType::FLOAT32, false, 0) && converts(plan))
        .map(OperationCapability::from_plan)
        .collect())
}

/// The `matmul` plans of an Int32 and a Float32 matrix, in either order: Float32 products
/// whose Int32 operand is converted on load exactly as the CPU converts it, accumulating in
/// binary32, or in binary64 on a device that computes it (`float64`).
fn mixed_products(float64: bool) -> Result<Vec<OperationCapability>> {
    let (int, float) = (
        PlanOperand::Tensor(DType::INT32),
        PlanOperand::Tensor(DType::FLOAT32),
    );
    let mut accumulators = vec![None];
    if float64 {
        accumulators.push(Some(DType::FLOAT64));
    }
    let mut plans = Vec::new();
    for accumulator in accumulators {
        for form in [[int, float], [float, int]] {
            let plan = resolve_operation_plan("matmul", &form, accumulator)?;
            if plan.output() == DType::FLOAT32 && converts(&plan) {
                plans.push(OperationCapability::from_plan(plan));
            }
        }
    }
    Ok(plans)
}

/// Whether `plan` converts some tensor operand to another dtype.
fn converts(plan: &OperationPlan) -> bool {
    plan.operands()
        .iter()
        .any(|o| o.dtype().is_some_and(|d| d != o.convert_to()))
}

/// A weak scalar of `dtype`'s kind, for resolving plans.
fn weak_scalar(dtype: DType) -> Value {
    if dtype == DType::INT32 {
        Value::Int(1)
    } else if dtype == DType::BOOL {
        Value::Bool(true)
    } else {
        Value::Float(1.0)
    }
}

/// Whether the shaders compute `plan` in `dtype`: its arithmetic is binary32, Int32 that
/// cannot overflow, or (with `overflow_checked`) checked Int32, every operand after the
/// first `skip` (a `select`'s condition) converts to `dtype`, each tensor operand is either
/// of that dtype or an Int32 tensor converted to Float32 (the one conversion the shaders
/// make), and the output is `dtype` or a comparison's Bool.
fn executable(plan: &OperationPlan, dtype: DType, overflow_checked: bool, skip: usize) -> bool {
    let exact = match plan.compute() {
        Arithmetic::Binary32 | Arithmetic::Int32Exact => true,
        Arithmetic::Int32ExactChecked => overflow_checked,
    };
    let output = plan.output() == dtype || plan.output() == DType::BOOL;
    let converted = |o: &strideweave::operation::OperandPlan| match o.dtype() {
        None => true,
        Some(stored) => {
            stored == o.convert_to() || (stored == DType::INT32 && o.convert_to() == DType::FLOAT32)
        }
    };
    exact
        && output
        && plan
            .operands()
            .iter()
            .skip(skip)
            .all(|o| o.convert_to() == dtype && converted(o))
}

/// The `select` plans the shaders compute: a Bool tensor condition and two branches of one
/// dtype (Float32, Int32 or Bool), each a tensor or a weak scalar of its kind.
fn select_plans() -> Result<Vec<OperationCapability>> {
    let condition = PlanOperand::Tensor(DType::BOOL);
    let mut plans = Vec::new();
    for dtype in [DType::FLOAT32, DType::INT32, DType::BOOL] {
        let (tensor, scalar) = (
            PlanOperand::Tensor(dtype),
            PlanOperand::Scalar(weak_scalar(dtype)),
        );
        let mut forms = vec![
            [tensor, tensor],
            [tensor, scalar],
            [scalar, tensor],
            [scalar, scalar],
        ];
        if dtype == DType::FLOAT32 {
            // An Int32 branch against a Float32 one or a float scalar, converted.
            let int = PlanOperand::Tensor(DType::INT32);
            forms.extend([[int, tensor], [tensor, int], [int, scalar], [scalar, int]]);
        }
        for branches in forms {
            let form = [condition, branches[0], branches[1]];
            let Ok(plan) = resolve_operation_plan("select", &form, None) else {
                continue;
            };
            if plan.output() == dtype && executable(&plan, dtype, false, 1) {
                plans.push(OperationCapability::from_plan(plan));
            }
        }
    }
    Ok(plans)
}

/// Adds the compact and the strided pattern of `name` over `plans`.
fn add_pair(
    patterns: &mut Vec<KernelPattern>,
    name: &'static str,
    plans: Vec<OperationCapability>,
    kind: Kind,
    int: Option<IntKernel>,
) -> Result<()> {
    if plans.is_empty() {
        return Err(Error::Runtime(format!(
            "the Gpu kernels found no executable plan of '{name}'"
        )));
    }
    let definition = operation_definition(name)?;
    for (compact, id, preference) in [(true, "compact", 10), (false, "strided", 0)] {
        patterns.push(KernelPattern::new(
            &definition,
            plans.clone(),
            &format!("wgpu.{name}.{id}"),
            move |invocation, interface| {
                let interface = interface.clone();
                let rule = interface
                    .downcast_ref::<GpuInterface>()
                    .map_or_else(ReductionRule::for_gpu, |gpu| gpu.device().reduction_rule());
                match specialize(name, kind, int, (compact, rule), invocation)? {
                    Err(reason) => Ok(Preparation::Unsupported(Unsupported::new(reason)?)),
                    Ok(work) => launch(work, interface),
                }
            },
            preference,
        )?);
    }
    Ok(())
}

/// The shader scalar of `dtype`.
fn scalar_of(dtype: DType) -> Result<Scalar> {
    match dtype {
        d if d == DType::FLOAT32 => Ok(Scalar::F32),
        d if d == DType::INT32 => Ok(Scalar::I32),
        d if d == DType::BOOL => Ok(Scalar::Bool),
        other => Err(Error::Type(format!(
            "the Gpu kernels compute on Float32, Int32 and Bool, not {other}"
        ))),
    }
}

/// The coalesced leaves of `layout`, extent-1 leaves dropped: empty for a single element,
/// `[(n, 1)]` for a compact layout.
fn leaves(layout: &Layout) -> Vec<(usize, usize)> {
    layout
        .coalesce()
        .leaf_pairs()
        .filter(|(extent, _)| *extent > 1)
        .collect()
}

/// Whether `layout` maps ordinal `i` to `i · multiplier` (every ordinal when `size` is 1).
fn is_scaled(layout: &Layout, multiplier: usize) -> bool {
    match leaves(layout).as_slice() {
        [] => true,
        [(_, stride)] => *stride == multiplier,
        _ => false,
    }
}

/// The access of `layout` for the strided pattern.
fn baked(layout: &Layout) -> Access {
    Access::Leaves(leaves(layout))
}

/// The work one invocation specializes to, or the reason the compact pattern declines it.
fn specialize(
    name: &'static str,
    kind: Kind,
    int: Option<IntKernel>,
    (compact, rule): (bool, ReductionRule),
    invocation: &ResolvedInvocation,
) -> Result<std::result::Result<Launch, String>> {
    let spec = &invocation.results()[0];
    // What the operands compute in (a comparison's differs from its Bool result; a
    // `select`'s is its branches', the last operand's).
    let output = scalar_of(spec.dtype())?;
    let scalar = match invocation.plan().operands().last() {
        Some(operand) => scalar_of(operand.convert_to())?,
        None => output,
    };
    let result = spec.layout();
    let result_access = if is_scaled(result, 1) {
        Access::Scaled("1u")
    } else if compact {
        return Ok(Err(format!("the result layout {result} is not compact")));
    } else {
        baked(result)
    };
    let mut work = Launch::new(name, spec.clone());
    match kind {
        Kind::Elementwise(float) => {
            let (expr, overflow) = match scalar {
                Scalar::F32 => (float, None),
                Scalar::I32 | Scalar::Bool => {
                    let kernel = int.ok_or_else(|| {
                        Error::Type(format!("the Gpu '{name}' kernel computes Float32 only"))
                    })?;
                    (kernel.expr, kernel.overflow)
                }
            };
            let shape = spec.shape();
            let mut inputs = Vec::new();
            let plans = invocation.plan().operands();
            for (k, operand) in invocation.call().operands().iter().enumerate() {
                let (operand_scalar, stored) = match plans.get(k) {
                    Some(plan) => (
                        scalar_of(plan.convert_to())?,
                        scalar_of(plan.dtype().unwrap_or(plan.convert_to()))?,
                    ),
                    None => (scalar, scalar),
                };
                match (operand.as_tensor(), operand.as_scalar()) {
                    (Some(tensor), _) => {
                        let view = tensor.broadcast_to(shape)?;
                        let access = if is_scaled(view.layout(), 1) {
                            Access::Scaled("1u")
                        } else if compact {
                            return Ok(Err(format!(
                                "operand layout {} is not compact for result shape {shape}",
                                tensor.layout()
                            )));
                        } else {
                            baked(view.layout())
                        };
                        work.bind(tensor)?;
                        inputs.push(Input::Tensor {
                            access,
                            offset: tensor.offset() != 0,
                            scalar: operand_scalar,
                            stored,
                        });
                    }
                    (None, Some(value)) => {
                        let field = work.set_scalar(value, operand_scalar)?;
                        inputs.push(Input::Scalar {
                            field,
                            scalar: operand_scalar,
                        });
                    }
                    (None, None) => unreachable_operand(name)?,
                }
            }
            work.set_counts(spec.layout().size(), 0, 0)?;
            let key = format!(
                "ew|{name}|{}|{}|r{}",
                scalar.wgsl(),
                inputs
                    .iter()
                    .map(|input| input_key(input, scalar))
                    .collect::<Vec<_>>()
                    .join("|"),
                result_access.key()
            );
            work.set_checked(if overflow.is_some() {
                Checked::Elements
            } else {
                Checked::No
            });
            work.set_shader(key, move |windows| {
                wgsl::elementwise(output, expr, overflow, &inputs, &result_access, windows)
            });
        }
        Kind::Reduce(maximum) => {
            let x = invocation.call().tensor(0)?;
            let (rows, columns) = two_modes(name, x.layout())?;
            let (n, m) = (rows.size(), columns.size());
            let (row_access, column_access) = if is_scaled(&rows, 1) && is_scaled(&columns, n) {
                (Access::Scaled("1u"), Access::Scaled("n"))
            } else if compact {
                return Ok(Err(format!(
                    "operand layout {} is not column-major",
                    x.layout()
                )));
            } else {
                (baked(&rows), baked(&columns))
            };
            work.bind(x)?;
            let accumulator = if maximum {
                Accumulator::Native
            } else {
                accumulator_of(scalar, invocation)
            };
            if accumulator == Accumulator::Wide {
                work.set_checked(Checked::Sum);
            }
            let fold = (scalar, maximum, accumulator);
            let head = format!("{maximum}|{}|{}", scalar.wgsl(), accumulator.key());
            if rule.reduces_in_tree(n, m) {
                tree(
                    &mut work,
                    (n, m),
                    fold,
                    &head,
                    (row_access, column_access),
                    result_access,
                )?;
            } else {
                work.set_counts(n, m, 0)?;
                let key = format!(
                    "reduce|{head}|{}|{}|r{}",
                    row_access.key(),
                    column_access.key(),
                    result_access.key()
                );
                work.set_shader(key, move |windows| {
                    wgsl::reduce(
                        scalar,
                        maximum,
                        accumulator,
                        &row_access,
                        &column_access,
                        &result_access,
                        windows,
                    )
                });
            }
        }
        Kind::Matmul => {
            let lhs = invocation.call().tensor(0)?;
            let rhs = invocation.call().tensor(1)?;
            let (lhs_rows, lhs_inner) = two_modes(name, lhs.layout())?;
            let (rhs_rows, rhs_inner) = two_modes(name, rhs.layout())?;
            let (n, m, k) = (lhs_rows.size(), rhs_rows.size(), lhs_inner.size());
            let column_major = is_scaled(&lhs_rows, 1)
                && is_scaled(&lhs_inner, n)
                && is_scaled(&rhs_rows, 1)
                && is_scaled(&rhs_inner, m);
            let accesses = if column_major {
                // `params.m` holds N (the lhs inner stride) and `params.scalar` holds M.
                [
                    Access::Scaled("1u"),
                    Access::Scaled("m"),
                    Access::Scaled("1u"),
                    Access::Scaled("scalar"),
                ]
            } else if compact {
                return Ok(Err(format!(
                    "operand layouts {} and {} are not both column-major",
                    lhs.layout(),
                    rhs.layout()
                )));
            } else {
                [
                    baked(&lhs_rows),
                    baked(&lhs_inner),
                    baked(&rhs_rows),
                    baked(&rhs_inner),
                ]
            };
            work.bind(lhs)?;
            work.bind(rhs)?;
            let plans = invocation.plan().operands();
            let converted = [0, 1].map(|operand| {
                plans
                    .get(operand)
                    .is_some_and(|plan| plan.dtype().is_some_and(|d| d != plan.convert_to()))
            });
            if let Some(reason) = beyond_loop_bound(name, k) {
                return Ok(Err(reason));
            }
            work.set_counts(n * m, n, k)?;
            work.set_scalar_bits(u32::try_from(m).map_err(|_| too_large(name, m))?);
            let accumulator = accumulator_of(scalar, invocation);
            if accumulator == Accumulator::Wide {
                work.set_checked(Checked::Product { rows: n });
            }
            let long = wgsl::is_long(k);
            let conversion = match converted {
                [true, _] => "|lhs:i32",
                [false, true] => "|rhs:i32",
                _ => "",
            };
            let key = format!(
                "matmul|{}|{}{}{conversion}|{}|r{}",
                scalar.wgsl(),
                accumulator.key(),
                if long { "|long" } else { "" },
                accesses
                    .iter()
                    .map(Access::key)
                    .collect::<Vec<_>>()
                    .join("|"),
                result_access.key()
            );
            work.set_shader(key, move |windows| {
                wgsl::matmul(
                    (scalar, converted),
                    accumulator,
                    &accesses,
                    &result_access,
                    (windows, long),
                )
            });
        }
    }
    Ok(Ok(work))
}

/// Adds the passes of a parallel reduction of `n` results over a mode of `m` elements to
/// `work` (see [`wgsl::reduce_tree`]): the first reads the operand through its accesses, each
/// later one the partial results of the one before (through a scratch buffer), and the last
/// writes the result; [`wgsl::tree_passes`] sizes them so that no loop runs long.
fn tree(
    work: &mut Launch,
    (n, m): (usize, usize),
    fold: (Scalar, bool, Accumulator),
    head: &str,
    (rows, columns): (Access, Access),
    result: Access,
) -> Result<()> {
    let (_, maximum, accumulator) = fold;
    let words = match (maximum, accumulator) {
        (false, Accumulator::F64) => 2,
        (false, Accumulator::Wide) => 3,
        _ => 1,
    };
    let passes = wgsl::tree_passes(m);
    let mut source = Source::Operands;
    let mut input = TreeInput::Operand { rows, columns };
    for (p, &[mode, per_invocation, groups]) in passes.iter().enumerate() {
        let input_key = match &input {
            TreeInput::Operand { rows, columns } => format!("x|{}|{}", rows.key(), columns.key()),
            TreeInput::Partials => "partials".to_string(),
        };
        let (sink, output) = if p + 1 == passes.len() {
            (Sink::Result, TreeOutput::Result(result.clone()))
        } else {
            let bytes = (n * groups * words) as u64 * SLOT_BYTES;
            (Sink::Scratch(work.add_scratch(bytes)), TreeOutput::Partials)
        };
        let output_key = match &output {
            TreeOutput::Result(access) => format!("r{}", access.key()),
            TreeOutput::Partials => "partials".to_string(),
        };
        let key = format!("tree|{head}|{input_key}|{output_key}");
        let shader_input = input.clone();
        work.add_pass(
            (source, sink),
            [n, mode, groups, per_invocation],
            n * groups * wgsl::WORKGROUP as usize,
            key,
            move |windows| wgsl::reduce_tree(fold, &shader_input, &output, windows),
        )?;
        if let Sink::Scratch(index) = sink {
            source = Source::Scratch(index);
        }
        input = TreeInput::Partials;
    }
    Ok(())
}

/// What the sum or product of `invocation` on `scalar` elements accumulates in: exactly in
/// 96 bits for Int32 (the plan's exact-integer accumulation), in binary64 when a Float32
/// plan's accumulator dtype is Float64, in binary32 otherwise.
fn accumulator_of(scalar: Scalar, invocation: &ResolvedInvocation) -> Accumulator {
    match scalar {
        Scalar::I32 => Accumulator::Wide,
        Scalar::F32 if invocation.plan().accumulator_dtype() == Some(DType::FLOAT64) => {
            Accumulator::F64
        }
        Scalar::F32 | Scalar::Bool => Accumulator::Native,
    }
}

/// Why `name` declines a contracted mode of `extent` elements, when its loop cannot cover them
/// within the iterations some drivers run (see [`wgsl::LONGEST_MODE`]).
fn beyond_loop_bound(name: &str, extent: usize) -> Option<String> {
    (extent > wgsl::LONGEST_MODE).then(|| {
        format!(
            "'{name}' contracts a mode of {extent} elements; the Gpu kernels contract at \
             most {} in one invocation (llvmpipe ends a shader's loops after 65535 iterations)",
            wgsl::LONGEST_MODE
        )
    })
}

/// The part of a specialization key an elementwise input contributes: its access (and
/// `+o` when its offset is added), or its `Params` field, with `:<type>` when it holds other
/// values than the computation (a `select` condition, an Int32 tensor converted to Float32).
fn input_key(input: &Input, computing: Scalar) -> String {
    let (head, scalar) = match input {
        Input::Tensor {
            access,
            offset,
            stored,
            ..
        } => (
            format!("{}{}", access.key(), if *offset { "+o" } else { "" }),
            *stored,
        ),
        Input::Scalar { field, scalar } => (field.to_string(), *scalar),
    };
    if scalar == computing {
        head
    } else {
        format!("{head}:{}", scalar.wgsl())
    }
}

fn unreachable_operand(name: &str) -> Result<()> {
    Err(Error::Runtime(format!(
        "an operand of '{name}' is neither a tensor nor a scalar"
    )))
}

fn too_large(name: &str, count: usize) -> Error {
    Error::Value(format!(
        "the Gpu '{name}' kernel addresses elements with 32-bit indices; {count} is too many"
    ))
}

/// The two top-level modes of a reduction or product operand.
fn two_modes(name: &str, layout: &Layout) -> Result<(Layout, Layout)> {
    let modes = layout.modes();
    match modes.as_slice() {
        [rows, columns] => Ok((rows.clone(), columns.clone())),
        _ => Err(Error::Value(format!(
            "the Gpu '{name}' kernel needs an operand of two modes, got {layout}"
        ))),
    }
}
