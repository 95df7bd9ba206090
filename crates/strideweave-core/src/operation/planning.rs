//! Dtype planning: which [`OperationPlan`] a built-in operation computes with on given
//! operand dtypes (docs/operations.md, Dtype planning).
//!
//! Planning is value-independent: it looks only at each tensor operand's dtype (matched by
//! identity), at the *kind* of each weak scalar, and — when a weak integer scalar meets an
//! Int32 plan — at whether that scalar fits Int32. Only Float32, Int32 and Bool tensors have
//! plans; Float64 is an accumulator dtype only.
//!
//! ```
//! use strideweave::operation::{resolve_operation_plan, Arithmetic, PlanOperand};
//! use strideweave::DType;
//! let plan = resolve_operation_plan(
//!     "add",
//!     &[PlanOperand::Tensor(DType::INT32), PlanOperand::Tensor(DType::FLOAT32)],
//!     None,
//! )?;
//! assert_eq!(plan.compute(), Arithmetic::Binary32);
//! assert_eq!(plan.output(), DType::FLOAT32);
//! # Ok::<(), strideweave::Error>(())
//! ```

use crate::dtype::{DType, Value};
use crate::error::{quoted, Error, Result};
use crate::operation::builtin::{Builtin, BUILTIN_OPERATIONS};
use crate::operation::plan::{Accumulation, Arithmetic, OperandPlan, OperationPlan};

/// An operand as planning sees it: a tensor's dtype, or a Rust scalar value (a weak scalar).
///
/// A weak scalar adopts the tensor's kind: [`Value::Int`] is of integer kind, while
/// [`Value::Float`] **and** [`Value::Bool`] are of floating kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlanOperand {
    /// A tensor of this dtype.
    Tensor(DType),
    /// A weak scalar with this value.
    Scalar(Value),
}

/// Resolves the plan `operation` computes with on `operands`, optionally accumulating in
/// `accumulator_dtype` (only `reduce_sum` and `matmul` take one).
///
/// Checks run in this order: the operation name, the accumulator dtype, the operand arity
/// and roles, the tensor dtypes, then the operation's family rules (which include the Int32
/// range check of a weak integer scalar and the refusal of an accumulator on an
/// exact-integer plan).
///
/// # Errors
/// - [`Error::NotImplemented`] for an unknown operation, a tensor of a simple dtype other
///   than Float32, Int32 or Bool (e.g. Float64), or an accumulator dtype that is simple but
///   neither Float32 nor Float64;
/// - [`Error::Type`] for a wrong arity or operand role, a category tensor dtype, an
///   arithmetic operation on Bool tensors (Bool never promotes), a `select` condition that
///   is not a Bool tensor or a `select` of a Bool tensor against a non-Bool branch, an
///   accumulator on an operation that takes none, a category accumulator, or an accumulator
///   on an Int32 plan;
/// - [`Error::Overflow`] for a weak integer scalar outside the Int32 range that meets an
///   Int32 plan.
pub fn resolve_operation_plan(
    operation: &str,
    operands: &[PlanOperand],
    accumulator_dtype: Option<DType>,
) -> Result<OperationPlan> {
    let builtin = Builtin::from_name(operation).ok_or_else(|| {
        Error::NotImplemented(format!(
            "no dtype plan is defined for {}: it is not a built-in operation (built-ins: {})",
            quoted(operation),
            BUILTIN_OPERATIONS.join(", ")
        ))
    })?;
    plan_builtin(builtin, operands, accumulator_dtype)
}

/// [`resolve_operation_plan`] for a built-in named by its typed identity.
pub(crate) fn plan_builtin(
    builtin: Builtin,
    operands: &[PlanOperand],
    accumulator_dtype: Option<DType>,
) -> Result<OperationPlan> {
    let operation = builtin.name();
    let family = builtin.spec().family;
    let accumulator = check_accumulator(operation, family, accumulator_dtype)?;
    let shape = OperandShape::of(operation, family, operands)?;
    let planner = Planner {
        operation,
        accumulator,
    };
    match shape {
        OperandShape::Unary(dtype) => {
            let element = Element::of_tensor(operation, dtype)?;
            planner.unary(family, dtype, element)
        }
        OperandShape::Pair(lhs, rhs) => {
            let lhs_element = Element::of_tensor(operation, lhs)?;
            let rhs_element = Element::of_tensor(operation, rhs)?;
            planner.pair(family, (lhs, lhs_element), (rhs, rhs_element))
        }
        OperandShape::WithScalar {
            tensor,
            scalar,
            scalar_first,
        } => {
            let element = Element::of_tensor(operation, tensor)?;
            planner.with_scalar(family, (tensor, element), scalar, scalar_first)
        }
        OperandShape::Select { cond, a, b } => planner.select(cond, a, b),
    }
}

/// The planning families of the built-in operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// `add`, `sub`, `elementwise_mul`: (T, T), Int32 checked or Float32.
    Additive,
    /// `mul`: (T, T), (T, S), (S, T).
    Mul,
    /// `div`: (T, T), (T, S), always Float32.
    Div,
    /// `maximum`, `minimum`: (T, T), (T, S), Int32 exact or Float32.
    Extremum,
    /// `eq`, `lt`, `le`: (T, T), (T, S), Bool output; `eq` also compares Bools.
    Compare {
        /// Whether Bool operands are accepted (`eq` only).
        accepts_bool: bool,
    },
    /// `relu`: keeps Float32 / Int32 (exact).
    Relu,
    /// `neg`, `abs`: keeps Float32 / Int32 (checked).
    SignChange,
    /// `exp`, `log`, `sqrt`, `tanh`, `sigmoid`: always Float32.
    Transcendental,
    /// `reduce_sum`.
    ReduceSum,
    /// `reduce_max`.
    ReduceMax,
    /// `matmul`.
    Matmul,
    /// `select`: a Bool tensor condition, then two tensors or weak scalars promoting like
    /// `maximum` (Bool branches only with Bool).
    Select,
}

impl Family {
    /// Whether the family takes the `accumulator_dtype` option.
    pub(crate) fn takes_accumulator(self) -> bool {
        matches!(self, Family::ReduceSum | Family::Matmul)
    }

    /// The operand forms the family accepts, for arity/role messages.
    fn needs(self) -> &'static str {
        match self {
            Family::Additive | Family::Matmul => "takes 2 operands: two tensors",
            Family::Mul => {
                "takes 2 operands: two tensors, or a tensor and a weak scalar in either order"
            }
            Family::Div | Family::Extremum | Family::Compare { .. } => {
                "takes 2 operands: a tensor, then a tensor or a weak scalar"
            }
            Family::Relu
            | Family::SignChange
            | Family::Transcendental
            | Family::ReduceSum
            | Family::ReduceMax => "takes 1 operand: a tensor",
            Family::Select => {
                "takes 3 operands: a Bool tensor condition, then two tensors or weak scalars"
            }
        }
    }
}

/// Validates the accumulator request against the operation (Type) and the dtype (Type for a
/// non-simple dtype, NotImplemented for a simple dtype other than Float32 / Float64).
fn check_accumulator(
    operation: &str,
    family: Family,
    accumulator: Option<DType>,
) -> Result<Option<DType>> {
    let Some(dtype) = accumulator else {
        return Ok(None);
    };
    if !family.takes_accumulator() {
        return Err(Error::Type(format!(
            "'{operation}' takes no accumulator dtype (only reduce_sum and matmul do), \
             got {dtype}"
        )));
    }
    if !dtype.is_simple() {
        return Err(Error::Type(format!(
            "'{operation}' needs a simple accumulator dtype (Float32 or Float64), got {}",
            describe_non_simple(dtype)
        )));
    }
    if dtype != DType::FLOAT32 && dtype != DType::FLOAT64 {
        return Err(Error::NotImplemented(format!(
            "'{operation}' has no plan accumulating in {dtype} (accumulator dtypes are \
             Float32 and Float64)"
        )));
    }
    Ok(Some(dtype))
}

/// `"the category Any"` for a category, else the dtype's name.
fn describe_non_simple(dtype: DType) -> String {
    if dtype.is_category() {
        format!("the category {dtype}")
    } else {
        format!("the non-simple dtype {dtype}")
    }
}

/// The operands sorted into the forms planning distinguishes.
#[derive(Debug, Clone, Copy)]
enum OperandShape {
    /// One tensor.
    Unary(DType),
    /// Two tensors.
    Pair(DType, DType),
    /// A tensor and a weak scalar; `scalar_first` for the (S, T) order of `mul`.
    WithScalar {
        tensor: DType,
        scalar: Value,
        scalar_first: bool,
    },
    /// `select`: a condition tensor and the two branches, each a tensor or a weak scalar.
    Select {
        cond: DType,
        a: PlanOperand,
        b: PlanOperand,
    },
}

impl OperandShape {
    /// Matches `operands` against the forms `family` accepts (Type otherwise).
    fn of(operation: &str, family: Family, operands: &[PlanOperand]) -> Result<OperandShape> {
        use PlanOperand::{Scalar, Tensor};
        let unary = matches!(
            family,
            Family::Relu
                | Family::SignChange
                | Family::Transcendental
                | Family::ReduceSum
                | Family::ReduceMax
        );
        let select = family == Family::Select;
        let tensor_scalar = matches!(
            family,
            Family::Mul | Family::Div | Family::Extremum | Family::Compare { .. }
        );
        let shape = match *operands {
            [Tensor(dtype)] if unary => Some(OperandShape::Unary(dtype)),
            [Tensor(lhs), Tensor(rhs)] if !unary && !select => Some(OperandShape::Pair(lhs, rhs)),
            [Tensor(tensor), Scalar(scalar)] if tensor_scalar => Some(OperandShape::WithScalar {
                tensor,
                scalar,
                scalar_first: false,
            }),
            [Scalar(scalar), Tensor(tensor)] if family == Family::Mul => {
                Some(OperandShape::WithScalar {
                    tensor,
                    scalar,
                    scalar_first: true,
                })
            }
            [Tensor(cond), a, b] if select => Some(OperandShape::Select { cond, a, b }),
            _ => None,
        };
        shape.ok_or_else(|| {
            let got: Vec<String> = operands.iter().map(|o| describe_operand(*o)).collect();
            Error::Type(format!(
                "'{operation}' {}; got {} operand(s) ({})",
                family.needs(),
                operands.len(),
                got.join(", ")
            ))
        })
    }
}

/// `"tensor Float32"` or `"weak scalar int 2"`.
fn describe_operand(operand: PlanOperand) -> String {
    match operand {
        PlanOperand::Tensor(dtype) => format!("tensor {dtype}"),
        PlanOperand::Scalar(value) => format!("weak scalar {} {value}", value.type_name()),
    }
}

/// The element types a tensor operand of a plan may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Element {
    Float32,
    Int32,
    Bool,
}

impl Element {
    /// Classifies a tensor dtype: a category is a Type error, any simple (or future
    /// compound) dtype other than Float32, Int32 and Bool is NotImplemented.
    fn of_tensor(operation: &str, dtype: DType) -> Result<Element> {
        if dtype == DType::FLOAT32 {
            Ok(Element::Float32)
        } else if dtype == DType::INT32 {
            Ok(Element::Int32)
        } else if dtype == DType::BOOL {
            Ok(Element::Bool)
        } else if dtype.is_category() {
            Err(Error::Type(format!(
                "'{operation}' needs tensors of a simple dtype, got a tensor of the category \
                 {dtype}"
            )))
        } else if dtype == DType::FLOAT64 {
            Err(Error::NotImplemented(format!(
                "'{operation}': no plan computes on Float64 tensors (Float64 is an \
                 accumulator dtype only)"
            )))
        } else {
            Err(Error::NotImplemented(format!(
                "'{operation}': no backend implements operations on {dtype} tensors (plans \
                 compute on Float32, Int32 and Bool)"
            )))
        }
    }
}

/// A branch of `select` as its promotion sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Branch {
    /// A tensor of this dtype and element type.
    Tensor(DType, Element),
    /// A weak integer scalar with this value (range-checked when it meets an Int32 plan).
    Int(i64),
    /// A weak float scalar.
    Float,
    /// A weak bool scalar.
    Bool,
}

impl Branch {
    /// Classifies a branch operand (the tensor dtype errors of [`Element::of_tensor`]).
    fn of(operation: &str, operand: PlanOperand) -> Result<Branch> {
        Ok(match operand {
            PlanOperand::Tensor(dtype) => {
                Branch::Tensor(dtype, Element::of_tensor(operation, dtype)?)
            }
            PlanOperand::Scalar(Value::Int(value)) => Branch::Int(value),
            PlanOperand::Scalar(Value::Float(_)) => Branch::Float,
            PlanOperand::Scalar(Value::Bool(_)) => Branch::Bool,
        })
    }
}

/// The shared inputs of one resolution.
struct Planner<'a> {
    operation: &'a str,
    /// The validated accumulator request (Float32 or Float64), if any.
    accumulator: Option<DType>,
}

impl Planner<'_> {
    fn bool_refused(&self) -> Error {
        Error::Type(format!(
            "'{}' does not compute on Bool tensors (Bool never promotes)",
            self.operation
        ))
    }

    /// Refuses an accumulator request on an exact-integer plan.
    fn no_accumulator_on_integers(&self) -> Result<()> {
        match self.accumulator {
            None => Ok(()),
            Some(dtype) => Err(Error::Type(format!(
                "'{}' on Int32 tensors accumulates exact integers and takes no accumulator \
                 dtype, got {dtype}",
                self.operation
            ))),
        }
    }

    /// Materializes a weak integer scalar as Int32 (Overflow outside the range).
    fn check_int32_scalar(&self, value: i64) -> Result<()> {
        if i32::try_from(value).is_ok() {
            Ok(())
        } else {
            Err(Error::Overflow(format!(
                "'{}': weak scalar {value} meets an Int32 plan and is out of int32 range \
                 [{}, {}]",
                self.operation,
                i32::MIN,
                i32::MAX
            )))
        }
    }

    fn plan(
        &self,
        operands: Vec<OperandPlan>,
        compute: Arithmetic,
        accumulation: Option<Accumulation>,
        accumulator_dtype: Option<DType>,
        output: DType,
    ) -> Result<OperationPlan> {
        OperationPlan::new(
            self.operation,
            operands,
            compute,
            accumulation,
            accumulator_dtype,
            output,
        )
    }

    /// One-tensor operations.
    fn unary(&self, family: Family, dtype: DType, element: Element) -> Result<OperationPlan> {
        if element == Element::Bool {
            return Err(self.bool_refused());
        }
        let int = element == Element::Int32;
        let f32 = DType::FLOAT32;
        let i32 = DType::INT32;
        match family {
            Family::Relu | Family::SignChange | Family::ReduceMax if int => {
                let compute = if family == Family::SignChange {
                    Arithmetic::Int32ExactChecked
                } else {
                    Arithmetic::Int32Exact
                };
                let accumulation = (family == Family::ReduceMax).then_some(Accumulation::Maximum);
                let operand = OperandPlan::tensor(dtype, i32)?;
                self.plan(vec![operand], compute, accumulation, None, i32)
            }
            Family::ReduceSum if int => {
                self.no_accumulator_on_integers()?;
                let operand = OperandPlan::tensor(dtype, i32)?;
                self.plan(
                    vec![operand],
                    Arithmetic::Int32ExactChecked,
                    Some(Accumulation::ExactInteger),
                    None,
                    i32,
                )
            }
            Family::ReduceSum => {
                let operand = OperandPlan::tensor(dtype, f32)?;
                self.plan(
                    vec![operand],
                    Arithmetic::Binary32,
                    Some(Accumulation::Floating),
                    Some(self.accumulator.unwrap_or(f32)),
                    f32,
                )
            }
            _ => {
                // Float32 relu/neg/abs/reduce_max, and every transcendental (Int32 converts).
                let accumulation = (family == Family::ReduceMax).then_some(Accumulation::Maximum);
                let operand = OperandPlan::tensor(dtype, f32)?;
                self.plan(vec![operand], Arithmetic::Binary32, accumulation, None, f32)
            }
        }
    }

    /// Two-tensor operations.
    fn pair(
        &self,
        family: Family,
        (lhs, lhs_element): (DType, Element),
        (rhs, rhs_element): (DType, Element),
    ) -> Result<OperationPlan> {
        let any_bool = lhs_element == Element::Bool || rhs_element == Element::Bool;
        let both_int = lhs_element == Element::Int32 && rhs_element == Element::Int32;
        if let Family::Compare { accepts_bool } = family {
            if any_bool {
                if !(accepts_bool && lhs_element == rhs_element) {
                    return Err(self.compare_bool_refused(describe_pair(lhs, rhs)));
                }
                return self.compare(
                    vec![
                        OperandPlan::tensor(lhs, DType::BOOL)?,
                        OperandPlan::tensor(rhs, DType::BOOL)?,
                    ],
                    Arithmetic::Int32Exact,
                );
            }
            let (convert, compute) = if both_int {
                (DType::INT32, Arithmetic::Int32Exact)
            } else {
                (DType::FLOAT32, Arithmetic::Binary32)
            };
            let operands = vec![
                OperandPlan::tensor(lhs, convert)?,
                OperandPlan::tensor(rhs, convert)?,
            ];
            return self.compare(operands, compute);
        }
        if any_bool {
            return Err(self.bool_refused());
        }
        let int_compute = match family {
            Family::Additive | Family::Mul => Some(Arithmetic::Int32ExactChecked),
            Family::Extremum | Family::Matmul => Some(Arithmetic::Int32Exact),
            _ => None, // div is always Float32
        };
        let accumulation = (family == Family::Matmul).then_some(Accumulation::Floating);
        match int_compute {
            Some(compute) if both_int => {
                let int_accumulation = if family == Family::Matmul {
                    self.no_accumulator_on_integers()?;
                    Some(Accumulation::ExactInteger)
                } else {
                    None
                };
                let operands = vec![
                    OperandPlan::tensor(lhs, DType::INT32)?,
                    OperandPlan::tensor(rhs, DType::INT32)?,
                ];
                self.plan(operands, compute, int_accumulation, None, DType::INT32)
            }
            _ => {
                let operands = vec![
                    OperandPlan::tensor(lhs, DType::FLOAT32)?,
                    OperandPlan::tensor(rhs, DType::FLOAT32)?,
                ];
                let accumulator_dtype =
                    accumulation.map(|_| self.accumulator.unwrap_or(DType::FLOAT32));
                self.plan(
                    operands,
                    Arithmetic::Binary32,
                    accumulation,
                    accumulator_dtype,
                    DType::FLOAT32,
                )
            }
        }
    }

    /// A tensor with a weak scalar; `scalar_first` swaps the operand plans (`mul` (S, T)).
    fn with_scalar(
        &self,
        family: Family,
        (tensor, element): (DType, Element),
        scalar: Value,
        scalar_first: bool,
    ) -> Result<OperationPlan> {
        let order = |tensor_plan: OperandPlan, scalar_plan: OperandPlan| {
            if scalar_first {
                vec![scalar_plan, tensor_plan]
            } else {
                vec![tensor_plan, scalar_plan]
            }
        };
        if element == Element::Bool {
            return match (family, scalar) {
                (Family::Compare { accepts_bool: true }, Value::Bool(_)) => self.compare(
                    order(
                        OperandPlan::tensor(tensor, DType::BOOL)?,
                        OperandPlan::weak_scalar(DType::BOOL)?,
                    ),
                    Arithmetic::Int32Exact,
                ),
                (Family::Compare { .. }, _) => Err(self.compare_bool_refused(format!(
                    "tensor Bool with {}",
                    describe_operand(PlanOperand::Scalar(scalar))
                ))),
                _ => Err(self.bool_refused()),
            };
        }
        let int_compute = match family {
            Family::Mul => Some(Arithmetic::Int32ExactChecked),
            Family::Extremum | Family::Compare { .. } => Some(Arithmetic::Int32Exact),
            _ => None, // div is always Float32
        };
        let (convert, compute) = match (element, scalar, int_compute) {
            (Element::Int32, Value::Int(value), Some(compute)) => {
                self.check_int32_scalar(value)?;
                (DType::INT32, compute)
            }
            _ => (DType::FLOAT32, Arithmetic::Binary32),
        };
        let operands = order(
            OperandPlan::tensor(tensor, convert)?,
            OperandPlan::weak_scalar(convert)?,
        );
        if matches!(family, Family::Compare { .. }) {
            self.compare(operands, compute)
        } else {
            self.plan(operands, compute, None, None, convert)
        }
    }

    /// `select(cond, a, b)`: `cond` must be a Bool tensor (a Type error naming its dtype
    /// otherwise). The branches promote like `maximum`: Int32 tensors and integer scalars
    /// compute exactly in Int32 (a scalar outside the range is an Overflow error), a Float32
    /// tensor or a floating or bool scalar makes the plan Float32. Bool tensors select only
    /// among Bools: a Bool tensor with a Bool tensor or a bool scalar gives Bool, with
    /// anything else it is a Type error (Bool never promotes).
    fn select(&self, cond: DType, a: PlanOperand, b: PlanOperand) -> Result<OperationPlan> {
        if cond != DType::BOOL {
            let got = if cond.is_simple() {
                cond.to_string()
            } else {
                describe_non_simple(cond)
            };
            return Err(Error::Type(format!(
                "'{}' needs a Bool tensor condition, got a tensor of {got}",
                self.operation
            )));
        }
        let branches = [
            Branch::of(self.operation, a)?,
            Branch::of(self.operation, b)?,
        ];
        let is_bool_tensor = |branch: &Branch| matches!(branch, Branch::Tensor(_, Element::Bool));
        let convert = if branches.iter().any(is_bool_tensor) {
            let all_bool = branches
                .iter()
                .all(|branch| is_bool_tensor(branch) || *branch == Branch::Bool);
            if !all_bool {
                return Err(Error::Type(format!(
                    "'{}' selects between a Bool tensor and only a Bool tensor or a bool \
                     scalar (Bool never promotes), got {} and {}",
                    self.operation,
                    describe_operand(a),
                    describe_operand(b)
                )));
            }
            DType::BOOL
        } else if branches.iter().any(|branch| {
            matches!(
                branch,
                Branch::Tensor(_, Element::Float32) | Branch::Float | Branch::Bool
            )
        }) {
            DType::FLOAT32
        } else {
            for branch in branches {
                if let Branch::Int(value) = branch {
                    self.check_int32_scalar(value)?;
                }
            }
            DType::INT32
        };
        let compute = if convert == DType::FLOAT32 {
            Arithmetic::Binary32
        } else {
            Arithmetic::Int32Exact
        };
        let mut operands = vec![OperandPlan::tensor(cond, DType::BOOL)?];
        for branch in branches {
            operands.push(match branch {
                Branch::Tensor(dtype, _) => OperandPlan::tensor(dtype, convert)?,
                Branch::Int(_) | Branch::Float | Branch::Bool => OperandPlan::weak_scalar(convert)?,
            });
        }
        self.plan(operands, compute, None, None, convert)
    }

    /// A comparison plan: Bool output, no accumulation.
    fn compare(&self, operands: Vec<OperandPlan>, compute: Arithmetic) -> Result<OperationPlan> {
        self.plan(operands, compute, None, None, DType::BOOL)
    }

    fn compare_bool_refused(&self, got: String) -> Error {
        let allowed = if self.operation == "eq" {
            "compares Bool only with Bool"
        } else {
            "does not compare Bool tensors"
        };
        Error::Type(format!(
            "'{}' {allowed} (Bool never promotes), got {got}",
            self.operation
        ))
    }
}

/// `"tensors Bool and Float32"`.
fn describe_pair(lhs: DType, rhs: DType) -> String {
    format!("tensors {lhs} and {rhs}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::operation::OperandRole;

    const F32: DType = DType::FLOAT32;
    const F64: DType = DType::FLOAT64;
    const I32: DType = DType::INT32;
    const BOOL: DType = DType::BOOL;

    fn t(dtype: DType) -> PlanOperand {
        PlanOperand::Tensor(dtype)
    }

    fn s(value: impl Into<Value>) -> PlanOperand {
        PlanOperand::Scalar(value.into())
    }

    fn plan(operation: &str, operands: &[PlanOperand]) -> OperationPlan {
        match resolve_operation_plan(operation, operands, None) {
            Ok(plan) => plan,
            Err(error) => panic!("{operation} {operands:?}: {error}"),
        }
    }

    fn plan_acc(operation: &str, operands: &[PlanOperand], acc: DType) -> OperationPlan {
        match resolve_operation_plan(operation, operands, Some(acc)) {
            Ok(plan) => plan,
            Err(error) => panic!("{operation} {operands:?} acc {acc}: {error}"),
        }
    }

    /// Asserts the error kind and that the message contains every fragment.
    fn assert_error(
        operation: &str,
        operands: &[PlanOperand],
        accumulator: Option<DType>,
        kind: ErrorKind,
        fragments: &[&str],
    ) {
        let error = match resolve_operation_plan(operation, operands, accumulator) {
            Ok(plan) => panic!("{operation} {operands:?} {accumulator:?} planned {plan}"),
            Err(error) => error,
        };
        assert_eq!(error.kind(), kind, "{error}");
        let message = error.to_string();
        for fragment in fragments {
            assert!(
                message.contains(fragment),
                "{fragment:?} not in {message:?}"
            );
        }
    }

    fn tensor_op(dtype: DType, convert_to: DType) -> OperandPlan {
        OperandPlan::tensor(dtype, convert_to).unwrap()
    }

    fn scalar_op(convert_to: DType) -> OperandPlan {
        OperandPlan::weak_scalar(convert_to).unwrap()
    }

    /// Asserts every field of an elementwise (no accumulation) plan.
    fn assert_elementwise(
        plan: &OperationPlan,
        operation: &str,
        operands: &[OperandPlan],
        compute: Arithmetic,
        output: DType,
    ) {
        assert_eq!(plan.operation(), operation, "{plan}");
        assert_eq!(plan.operands(), operands, "{plan}");
        assert_eq!(plan.compute(), compute, "{plan}");
        assert_eq!(plan.accumulation(), None, "{plan}");
        assert_eq!(plan.accumulator_dtype(), None, "{plan}");
        assert_eq!(plan.output(), output, "{plan}");
    }

    #[test]
    fn scenario_01_add_int32_float32_promotes_to_float32() {
        let p = plan("add", &[t(I32), t(F32)]);
        assert_elementwise(
            &p,
            "add",
            &[tensor_op(I32, F32), tensor_op(F32, F32)],
            Arithmetic::Binary32,
            F32,
        );
    }

    #[test]
    fn scenario_02_int32_add_is_checked_and_reduce_sum_exact() {
        let p = plan("add", &[t(I32), t(I32)]);
        assert_elementwise(
            &p,
            "add",
            &[tensor_op(I32, I32), tensor_op(I32, I32)],
            Arithmetic::Int32ExactChecked,
            I32,
        );
        let p = plan("reduce_sum", &[t(I32)]);
        assert_eq!(p.operands(), [tensor_op(I32, I32)]);
        assert_eq!(p.compute(), Arithmetic::Int32ExactChecked);
        assert_eq!(p.accumulation(), Some(Accumulation::ExactInteger));
        assert_eq!(p.accumulator_dtype(), None);
        assert_eq!(p.output(), I32);
    }

    #[test]
    fn scenario_03_weak_scalars() {
        // A bool scalar is of floating kind.
        let p = plan("mul", &[t(I32), s(true)]);
        assert_elementwise(
            &p,
            "mul",
            &[tensor_op(I32, F32), scalar_op(F32)],
            Arithmetic::Binary32,
            F32,
        );
        // An integer scalar materializes as Int32 against an Int32 tensor.
        assert_error(
            "mul",
            &[t(I32), s(1_i64 << 31)],
            None,
            ErrorKind::Overflow,
            &["'mul'", "2147483648", "Int32"],
        );
        assert_error(
            "mul",
            &[t(I32), s(-(1_i64 << 31) - 1)],
            None,
            ErrorKind::Overflow,
            &["-2147483649"],
        );
        let p = plan("mul", &[t(I32), s(i64::from(i32::MIN))]);
        assert_elementwise(
            &p,
            "mul",
            &[tensor_op(I32, I32), scalar_op(I32)],
            Arithmetic::Int32ExactChecked,
            I32,
        );
        // Against a Float32 tensor the scalar converts to Float32.
        let p = plan("mul", &[t(F32), s(1_i64 << 31)]);
        assert_elementwise(
            &p,
            "mul",
            &[tensor_op(F32, F32), scalar_op(F32)],
            Arithmetic::Binary32,
            F32,
        );
        let p = plan("div", &[t(I32), t(I32)]);
        assert_elementwise(
            &p,
            "div",
            &[tensor_op(I32, F32), tensor_op(I32, F32)],
            Arithmetic::Binary32,
            F32,
        );
        // (S, T) is the (T, S) plan with the operand plans swapped.
        for scalar in [s(3), s(2.5), s(false)] {
            for tensor in [F32, I32] {
                let forward = plan("mul", &[t(tensor), scalar]);
                let swapped = plan("mul", &[scalar, t(tensor)]);
                let mut operands = forward.operands().to_vec();
                operands.reverse();
                assert_eq!(swapped.operands(), operands.as_slice());
                assert_eq!(swapped.operands()[0].role(), OperandRole::WeakScalar);
                assert_eq!(swapped.compute(), forward.compute());
                assert_eq!(swapped.output(), forward.output());
                assert_eq!(swapped.accumulation(), None);
            }
        }
        assert_error(
            "mul",
            &[s(1_i64 << 31), t(I32)],
            None,
            ErrorKind::Overflow,
            &["2147483648"],
        );
    }

    #[test]
    fn scenario_04_accumulator_dtype() {
        let p = plan_acc("reduce_sum", &[t(F32)], F64);
        assert_eq!(p.operands(), [tensor_op(F32, F32)]);
        assert_eq!(p.compute(), Arithmetic::Binary32);
        assert_eq!(p.accumulation(), Some(Accumulation::Floating));
        assert_eq!(p.accumulator_dtype(), Some(F64));
        assert_eq!(p.output(), F32);
        assert_error(
            "reduce_sum",
            &[t(I32)],
            Some(F64),
            ErrorKind::Type,
            &["'reduce_sum'", "Int32", "Float64"],
        );
        assert_error(
            "add",
            &[t(F32), t(F32)],
            Some(F32),
            ErrorKind::Type,
            &["'add'", "accumulator", "Float32"],
        );
    }

    /// The arity differs per operation: try one tensor, then two, then a Bool condition
    /// with two tensors (`select`).
    fn plan_float32(operation: &str) -> OperationPlan {
        resolve_operation_plan(operation, &[t(F32)], None)
            .or_else(|_| resolve_operation_plan(operation, &[t(F32), t(F32)], None))
            .or_else(|_| resolve_operation_plan(operation, &[t(BOOL), t(F32), t(F32)], None))
            .unwrap_or_else(|error| panic!("{operation}: {error}"))
    }

    #[test]
    fn every_builtin_plans_on_float32_tensors() {
        assert_eq!(BUILTIN_OPERATIONS.len(), 22);
        assert_eq!(BUILTIN_OPERATIONS[0], "add");
        assert_eq!(BUILTIN_OPERATIONS[20], "matmul");
        assert_eq!(BUILTIN_OPERATIONS[21], "select");
        for operation in BUILTIN_OPERATIONS {
            let p = plan_float32(operation);
            assert_eq!(p.operation(), operation);
            let expected_output = if matches!(operation, "eq" | "lt" | "le") {
                BOOL
            } else {
                F32
            };
            assert_eq!(p.output(), expected_output, "{p}");
            assert_eq!(p.compute(), Arithmetic::Binary32, "{p}");
            // The condition of `select` stays Bool; every other operand computes in Float32.
            let computed = if operation == "select" {
                assert_eq!(p.operands()[0], tensor_op(BOOL, BOOL), "{p}");
                &p.operands()[1..]
            } else {
                p.operands()
            };
            assert!(computed.iter().all(|o| o.convert_to() == F32), "{p}");
            assert!(computed.iter().all(|o| o.dtype() == Some(F32)), "{p}");
        }
    }

    #[test]
    fn select_promotes_its_branches_like_maximum() {
        let cond = tensor_op(BOOL, BOOL);
        // Int32 with Int32 or an integer scalar: exact Int32.
        let int_cases: &[(PlanOperand, PlanOperand, OperandPlan, OperandPlan)] = &[
            (t(I32), t(I32), tensor_op(I32, I32), tensor_op(I32, I32)),
            (t(I32), s(-3), tensor_op(I32, I32), scalar_op(I32)),
            (s(7), t(I32), scalar_op(I32), tensor_op(I32, I32)),
            (s(1), s(0), scalar_op(I32), scalar_op(I32)),
        ];
        for &(a, b, plan_a, plan_b) in int_cases {
            let p = plan("select", &[t(BOOL), a, b]);
            assert_elementwise(
                &p,
                "select",
                &[cond, plan_a, plan_b],
                Arithmetic::Int32Exact,
                I32,
            );
        }
        // Anything with Float32 or a floating / bool scalar: Float32.
        let float_cases: &[(PlanOperand, PlanOperand, OperandPlan, OperandPlan)] = &[
            (t(F32), t(F32), tensor_op(F32, F32), tensor_op(F32, F32)),
            (t(I32), t(F32), tensor_op(I32, F32), tensor_op(F32, F32)),
            (t(F32), s(2), tensor_op(F32, F32), scalar_op(F32)),
            (t(I32), s(0.5), tensor_op(I32, F32), scalar_op(F32)),
            (s(true), t(I32), scalar_op(F32), tensor_op(I32, F32)),
            (s(1.0), s(0.0), scalar_op(F32), scalar_op(F32)),
            (s(true), s(false), scalar_op(F32), scalar_op(F32)),
            (s(1), s(0.0), scalar_op(F32), scalar_op(F32)),
            // A Float32 plan never materializes an Int32 scalar: no range check.
            (t(F32), s(i64::MAX), tensor_op(F32, F32), scalar_op(F32)),
        ];
        for &(a, b, plan_a, plan_b) in float_cases {
            let p = plan("select", &[t(BOOL), a, b]);
            assert_elementwise(
                &p,
                "select",
                &[cond, plan_a, plan_b],
                Arithmetic::Binary32,
                F32,
            );
        }
        // Bool with Bool (a bool scalar included) stays Bool.
        let p = plan("select", &[t(BOOL), t(BOOL), t(BOOL)]);
        assert_elementwise(
            &p,
            "select",
            &[cond, tensor_op(BOOL, BOOL), tensor_op(BOOL, BOOL)],
            Arithmetic::Int32Exact,
            BOOL,
        );
        let p = plan("select", &[t(BOOL), s(false), t(BOOL)]);
        assert_elementwise(
            &p,
            "select",
            &[cond, scalar_op(BOOL), tensor_op(BOOL, BOOL)],
            Arithmetic::Int32Exact,
            BOOL,
        );
    }

    #[test]
    fn select_refuses_bad_conditions_and_mixed_bool_branches() {
        for dtype in [F32, I32, F64, DType::E4M3, DType::ANY, DType::FLOATING] {
            assert_error(
                "select",
                &[t(dtype), t(F32), t(F32)],
                None,
                ErrorKind::Type,
                &["'select'", "Bool tensor condition", dtype.name()],
            );
        }
        for (a, b) in [
            (t(BOOL), t(F32)),
            (t(I32), t(BOOL)),
            (t(BOOL), s(1)),
            (s(0.5), t(BOOL)),
        ] {
            assert_error(
                "select",
                &[t(BOOL), a, b],
                None,
                ErrorKind::Type,
                &["'select'", "Bool", "never promotes"],
            );
        }
        for (a, b) in [(t(I32), s(1_i64 << 31)), (s(-(1_i64 << 31) - 1), s(0))] {
            assert_error(
                "select",
                &[t(BOOL), a, b],
                None,
                ErrorKind::Overflow,
                &["'select'", "Int32"],
            );
        }
        assert_error(
            "select",
            &[t(BOOL), t(F64), t(F32)],
            None,
            ErrorKind::NotImplemented,
            &["'select'", "Float64"],
        );
        assert_error(
            "select",
            &[t(BOOL), t(F32), t(DType::ANY)],
            None,
            ErrorKind::Type,
            &["'select'", "category"],
        );
        assert_error(
            "select",
            &[t(BOOL), t(F32), t(F32)],
            Some(F32),
            ErrorKind::Type,
            &["'select'", "accumulator"],
        );
    }

    #[test]
    fn unknown_operation_is_not_implemented() {
        for name in ["pow", "", "Add", "reduce_min"] {
            assert_error(
                name,
                &[t(F32)],
                None,
                ErrorKind::NotImplemented,
                &[&format!("'{name}'")],
            );
        }
    }

    #[test]
    fn category_tensor_dtypes_are_type_errors() {
        for category in [DType::ANY, DType::FLOATING, DType::INTEGER] {
            assert_error(
                "relu",
                &[t(category)],
                None,
                ErrorKind::Type,
                &["'relu'", category.name()],
            );
            assert_error(
                "add",
                &[t(F32), t(category)],
                None,
                ErrorKind::Type,
                &["'add'", category.name()],
            );
        }
    }

    #[test]
    fn unimplemented_simple_tensor_dtypes_are_not_implemented() {
        assert_error(
            "add",
            &[t(F64), t(F32)],
            None,
            ErrorKind::NotImplemented,
            &["'add'", "no plan computes on Float64 tensors"],
        );
        assert_error(
            "reduce_sum",
            &[t(F64)],
            Some(F64),
            ErrorKind::NotImplemented,
            &["Float64"],
        );
        let custom = DType::register_simple("planning_test_custom16", 16, DType::FLOATING)
            .expect("a fresh dtype name registers");
        for dtype in [
            DType::INT8,
            DType::E8M0,
            DType::E5M2,
            DType::E4M3,
            DType::E3M2,
            DType::E2M3,
            DType::E2M1,
            custom,
        ] {
            assert_error(
                "exp",
                &[t(dtype)],
                None,
                ErrorKind::NotImplemented,
                &["'exp'", dtype.name()],
            );
            assert_error(
                "mul",
                &[s(2), t(dtype)],
                None,
                ErrorKind::NotImplemented,
                &["'mul'", dtype.name()],
            );
        }
    }

    #[test]
    fn wrong_arity_or_role_is_a_type_error() {
        let cases: &[(&str, &[PlanOperand])] = &[
            ("add", &[]),
            ("add", &[t(F32)]),
            ("add", &[t(F32), t(F32), t(F32)]),
            ("add", &[t(F32), s(1.0)]),
            ("sub", &[s(1.0), t(F32)]),
            ("elementwise_mul", &[t(F32), s(2)]),
            ("mul", &[s(1), s(2)]),
            ("mul", &[t(F32)]),
            ("div", &[s(1.0), t(F32)]),
            ("maximum", &[s(1), t(I32)]),
            ("eq", &[s(true), t(BOOL)]),
            ("relu", &[s(1.0)]),
            ("relu", &[t(F32), t(F32)]),
            ("reduce_sum", &[]),
            ("matmul", &[t(F32), s(1.0)]),
            ("matmul", &[t(F32)]),
            ("select", &[t(BOOL), t(F32)]),
            ("select", &[s(true), t(F32), t(F32)]),
            ("select", &[t(BOOL), t(F32), t(F32), t(F32)]),
            ("add", &[t(BOOL), t(F32), t(F32)]),
        ];
        for (operation, operands) in cases {
            assert_error(
                operation,
                operands,
                None,
                ErrorKind::Type,
                &[
                    &format!("'{operation}' takes "),
                    &operands.len().to_string(),
                ],
            );
        }
        assert_error(
            "mul",
            &[s(1), s(2.5)],
            None,
            ErrorKind::Type,
            &["weak scalar int 1", "weak scalar float 2.5"],
        );
    }

    #[test]
    fn bool_tensors_never_take_part_in_arithmetic() {
        let cases: &[(&str, &[PlanOperand])] = &[
            ("add", &[t(BOOL), t(BOOL)]),
            ("sub", &[t(BOOL), t(F32)]),
            ("mul", &[t(I32), t(BOOL)]),
            ("mul", &[t(BOOL), s(true)]),
            ("mul", &[s(2), t(BOOL)]),
            ("div", &[t(BOOL), s(2.0)]),
            ("maximum", &[t(BOOL), t(BOOL)]),
            ("neg", &[t(BOOL)]),
            ("relu", &[t(BOOL)]),
            ("exp", &[t(BOOL)]),
            ("reduce_sum", &[t(BOOL)]),
            ("reduce_max", &[t(BOOL)]),
            ("matmul", &[t(BOOL), t(F32)]),
            ("lt", &[t(BOOL), t(BOOL)]),
            ("le", &[t(BOOL), s(true)]),
            ("eq", &[t(BOOL), t(F32)]),
            ("eq", &[t(I32), t(BOOL)]),
            ("eq", &[t(BOOL), s(1)]),
            ("eq", &[t(BOOL), s(1.0)]),
        ];
        for (operation, operands) in cases {
            assert_error(
                operation,
                operands,
                None,
                ErrorKind::Type,
                &[&format!("'{operation}'"), "Bool", "never promotes"],
            );
        }
    }

    #[test]
    fn eq_on_bool_outputs_bool() {
        let p = plan("eq", &[t(BOOL), t(BOOL)]);
        assert_elementwise(
            &p,
            "eq",
            &[tensor_op(BOOL, BOOL), tensor_op(BOOL, BOOL)],
            Arithmetic::Int32Exact,
            BOOL,
        );
        let p = plan("eq", &[t(BOOL), s(false)]);
        assert_elementwise(
            &p,
            "eq",
            &[tensor_op(BOOL, BOOL), scalar_op(BOOL)],
            Arithmetic::Int32Exact,
            BOOL,
        );
    }

    #[test]
    fn comparisons_output_bool() {
        for operation in ["eq", "lt", "le"] {
            let p = plan(operation, &[t(I32), t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, I32), tensor_op(I32, I32)],
                Arithmetic::Int32Exact,
                BOOL,
            );
            let p = plan(operation, &[t(I32), s(-7)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, I32), scalar_op(I32)],
                Arithmetic::Int32Exact,
                BOOL,
            );
            let p = plan(operation, &[t(F32), t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(F32, F32), tensor_op(I32, F32)],
                Arithmetic::Binary32,
                BOOL,
            );
            for scalar in [s(0.5), s(true)] {
                let p = plan(operation, &[t(I32), scalar]);
                assert_elementwise(
                    &p,
                    operation,
                    &[tensor_op(I32, F32), scalar_op(F32)],
                    Arithmetic::Binary32,
                    BOOL,
                );
            }
            assert_error(
                operation,
                &[t(I32), s(i64::MAX)],
                None,
                ErrorKind::Overflow,
                &[&format!("'{operation}'"), &i64::MAX.to_string()],
            );
        }
    }

    #[test]
    fn elementwise_binary_families() {
        for operation in ["add", "sub", "elementwise_mul", "mul"] {
            let p = plan(operation, &[t(F32), t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(F32, F32), tensor_op(I32, F32)],
                Arithmetic::Binary32,
                F32,
            );
            let p = plan(operation, &[t(I32), t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, I32), tensor_op(I32, I32)],
                Arithmetic::Int32ExactChecked,
                I32,
            );
        }
        let p = plan("div", &[t(I32), s(3)]);
        assert_elementwise(
            &p,
            "div",
            &[tensor_op(I32, F32), scalar_op(F32)],
            Arithmetic::Binary32,
            F32,
        );
        // div never materializes an Int32 scalar, so no range check applies.
        plan("div", &[t(I32), s(i64::MAX)]);
        for operation in ["maximum", "minimum"] {
            let p = plan(operation, &[t(I32), t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, I32), tensor_op(I32, I32)],
                Arithmetic::Int32Exact,
                I32,
            );
            let p = plan(operation, &[t(I32), s(0)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, I32), scalar_op(I32)],
                Arithmetic::Int32Exact,
                I32,
            );
            let p = plan(operation, &[t(I32), s(0.0)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, F32), scalar_op(F32)],
                Arithmetic::Binary32,
                F32,
            );
            assert_error(
                operation,
                &[t(I32), s(1_i64 << 40)],
                None,
                ErrorKind::Overflow,
                &["1099511627776"],
            );
        }
    }

    #[test]
    fn unary_families() {
        let p = plan("relu", &[t(I32)]);
        assert_elementwise(
            &p,
            "relu",
            &[tensor_op(I32, I32)],
            Arithmetic::Int32Exact,
            I32,
        );
        for operation in ["neg", "abs"] {
            let p = plan(operation, &[t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, I32)],
                Arithmetic::Int32ExactChecked,
                I32,
            );
        }
        for operation in ["exp", "log", "sqrt", "tanh", "sigmoid"] {
            let p = plan(operation, &[t(I32)]);
            assert_elementwise(
                &p,
                operation,
                &[tensor_op(I32, F32)],
                Arithmetic::Binary32,
                F32,
            );
        }
    }

    #[test]
    fn reductions_and_matmul() {
        let p = plan("reduce_sum", &[t(F32)]);
        assert_eq!(p.compute(), Arithmetic::Binary32);
        assert_eq!(p.accumulation(), Some(Accumulation::Floating));
        assert_eq!(p.accumulator_dtype(), Some(F32));
        assert_eq!(p.output(), F32);
        assert_eq!(
            plan_acc("reduce_sum", &[t(F32)], F32).accumulator_dtype(),
            Some(F32)
        );

        for (dtype, compute) in [(F32, Arithmetic::Binary32), (I32, Arithmetic::Int32Exact)] {
            let p = plan("reduce_max", &[t(dtype)]);
            assert_eq!(p.operands(), [tensor_op(dtype, dtype)]);
            assert_eq!(p.compute(), compute);
            assert_eq!(p.accumulation(), Some(Accumulation::Maximum));
            assert_eq!(p.accumulator_dtype(), None);
            assert_eq!(p.output(), dtype);
        }

        for (lhs, rhs) in [(F32, F32), (I32, F32), (F32, I32)] {
            let p = plan("matmul", &[t(lhs), t(rhs)]);
            assert_eq!(p.operands(), [tensor_op(lhs, F32), tensor_op(rhs, F32)]);
            assert_eq!(p.compute(), Arithmetic::Binary32);
            assert_eq!(p.accumulation(), Some(Accumulation::Floating));
            assert_eq!(p.accumulator_dtype(), Some(F32));
            assert_eq!(p.output(), F32);
            let wide = plan_acc("matmul", &[t(lhs), t(rhs)], F64);
            assert_eq!(wide.accumulator_dtype(), Some(F64));
            assert_eq!(wide.output(), F32);
        }
        let p = plan("matmul", &[t(I32), t(I32)]);
        assert_eq!(p.operands(), [tensor_op(I32, I32), tensor_op(I32, I32)]);
        assert_eq!(p.compute(), Arithmetic::Int32Exact);
        assert_eq!(p.accumulation(), Some(Accumulation::ExactInteger));
        assert_eq!(p.accumulator_dtype(), None);
        assert_eq!(p.output(), I32);
        assert_error(
            "matmul",
            &[t(I32), t(I32)],
            Some(F32),
            ErrorKind::Type,
            &["'matmul'", "Int32", "Float32"],
        );
    }

    #[test]
    fn accumulator_dtype_validation() {
        for operation in ["relu", "reduce_max", "mul"] {
            let operands: &[PlanOperand] = if operation == "mul" {
                &[t(F32), t(F32)]
            } else {
                &[t(F32)]
            };
            assert_error(
                operation,
                operands,
                Some(F64),
                ErrorKind::Type,
                &[&format!("'{operation}'"), "accumulator"],
            );
        }
        for category in [DType::ANY, DType::FLOATING, DType::INTEGER] {
            assert_error(
                "reduce_sum",
                &[t(F32)],
                Some(category),
                ErrorKind::Type,
                &["'reduce_sum'", category.name()],
            );
        }
        for simple in [DType::E4M3, DType::INT32, DType::BOOL, DType::INT8] {
            assert_error(
                "matmul",
                &[t(F32), t(F32)],
                Some(simple),
                ErrorKind::NotImplemented,
                &["'matmul'", simple.name()],
            );
        }
    }

    #[test]
    fn no_input_panics() {
        let pool = [
            t(F32),
            t(I32),
            t(BOOL),
            t(F64),
            t(DType::ANY),
            t(DType::E2M1),
            s(i64::MIN),
            s(0),
            s(f64::NAN),
            s(true),
        ];
        let accumulators = [
            None,
            Some(F32),
            Some(F64),
            Some(DType::ANY),
            Some(DType::E4M3),
        ];
        // Every operand list of length 0 to 3 drawn from the pool, built level by level.
        let mut lists: Vec<Vec<PlanOperand>> = vec![vec![]];
        let mut level: Vec<Vec<PlanOperand>> = vec![vec![]];
        for _ in 0..3 {
            level = level
                .iter()
                .flat_map(|list| {
                    pool.iter().map(move |operand| {
                        let mut next = list.clone();
                        next.push(*operand);
                        next
                    })
                })
                .collect();
            lists.extend(level.iter().cloned());
        }
        assert_eq!(lists.len(), 1 + 10 + 100 + 1000);
        for operation in BUILTIN_OPERATIONS.iter().copied().chain(["nope"]) {
            for operands in &lists {
                for accumulator in accumulators {
                    if let Ok(p) = resolve_operation_plan(operation, operands, accumulator) {
                        assert_eq!(p.operation(), operation);
                        assert_eq!(p.operands().len(), operands.len(), "{p}");
                    }
                }
            }
        }
    }
}
