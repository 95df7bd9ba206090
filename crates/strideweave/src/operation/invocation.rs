//! Bound calls, result specifications and resolved invocations (semantics-operations.md §2a):
//! what a definition's `resolve` produces and what kernels execute.

use std::sync::Arc;

use strideweave_layout::{Layout, Shape};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::definition::OperationDefinition;
use crate::operation::plan::{OperandRole, OperationPlan};
use crate::operation::schema::OptionValue;
use crate::operation::Operand;
use crate::tensor::Tensor;

/// A call bound against its definition's schema: operands in order and every option (defaults
/// filled). Built by the framework only.
#[derive(Debug, Clone)]
pub struct BoundOperationCall {
    definition: OperationDefinition,
    operands: Arc<[Operand]>,
    options: Arc<[(Arc<str>, OptionValue)]>,
}

impl BoundOperationCall {
    pub(crate) fn new(
        definition: OperationDefinition,
        operands: Vec<Operand>,
        options: Vec<(Arc<str>, OptionValue)>,
    ) -> Self {
        BoundOperationCall {
            definition,
            operands: operands.into(),
            options: options.into(),
        }
    }

    /// The operation being called.
    pub fn definition(&self) -> &OperationDefinition {
        &self.definition
    }

    /// The operands, in schema order.
    pub fn operands(&self) -> &[Operand] {
        &self.operands
    }

    /// Operand `i` as a tensor (a Type error naming the position otherwise).
    pub fn tensor(&self, i: usize) -> Result<&Tensor> {
        self.operands
            .get(i)
            .and_then(Operand::as_tensor)
            .ok_or_else(|| {
                Error::Type(format!(
                    "operand {i} of '{}' is not a tensor",
                    self.definition.name()
                ))
            })
    }

    /// The value of option `name` (defaults filled in).
    pub fn option(&self, name: &str) -> Option<OptionValue> {
        self.options
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| *v)
    }
}

/// The dtype, shape and exact layout one result must have; `alias_of` names an operand
/// returned as the identical tensor object; tolerances bound differences from the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSpec {
    dtype: DType,
    layout: Layout,
    alias_of: Option<usize>,
    atol: f64,
    rtol: f64,
}

impl ResultSpec {
    /// A fresh result of `dtype` with exactly `layout` (its shape is the layout's).
    pub fn new(dtype: DType, layout: Layout) -> ResultSpec {
        ResultSpec {
            dtype,
            layout,
            alias_of: None,
            atol: 0.0,
            rtol: 0.0,
        }
    }

    /// A fresh result of `dtype` with the canonical column-major layout of `shape`.
    pub fn canonical(dtype: DType, shape: Shape) -> ResultSpec {
        ResultSpec::new(dtype, Layout::column_major(shape))
    }

    /// Declares that this result is operand `index` itself.
    pub fn aliasing(mut self, index: usize) -> ResultSpec {
        self.alias_of = Some(index);
        self
    }

    /// Sets the tolerances against the reference; both must be finite and ≥ 0.
    pub fn with_tolerance(mut self, atol: f64, rtol: f64) -> Result<ResultSpec> {
        for (name, t) in [("atol", atol), ("rtol", rtol)] {
            if !t.is_finite() || t < 0.0 {
                return Err(Error::Value(format!(
                    "ResultSpec {name} must be finite and >= 0, got {t}"
                )));
            }
        }
        self.atol = atol;
        self.rtol = rtol;
        Ok(self)
    }

    /// The result dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The result shape.
    pub fn shape(&self) -> &Shape {
        self.layout.shape()
    }

    /// The exact result layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The operand this result aliases, if any.
    pub fn alias_of(&self) -> Option<usize> {
        self.alias_of
    }

    /// Absolute tolerance against the reference.
    pub fn atol(&self) -> f64 {
        self.atol
    }

    /// Relative tolerance against the reference.
    pub fn rtol(&self) -> f64 {
        self.rtol
    }
}

/// A call with its dtype plan and result specifications: what a kernel executes.
#[derive(Debug, Clone)]
pub struct ResolvedInvocation {
    call: BoundOperationCall,
    plan: OperationPlan,
    results: Arc<[ResultSpec]>,
    saved_operands: Arc<[usize]>,
    kernel_id: Arc<str>,
}

impl ResolvedInvocation {
    /// Validates and builds an invocation (Value errors): the plan names the call's
    /// operation and has one operand plan per operand with the matching role; there is at
    /// least one result; aliases and saved operands name distinct tensor operands; the kernel
    /// id (default: the operation name) is non-empty.
    pub fn new(
        call: BoundOperationCall,
        plan: OperationPlan,
        results: impl IntoIterator<Item = ResultSpec>,
        saved_operands: impl IntoIterator<Item = usize>,
        kernel_id: Option<&str>,
    ) -> Result<ResolvedInvocation> {
        let definition = call.definition().clone();
        let name = definition.name();
        if plan.operation() != name {
            return Err(Error::Value(format!(
                "the plan of '{}' cannot resolve a call of '{name}'",
                plan.operation()
            )));
        }
        let roles_match = plan.operands().len() == call.operands().len()
            && plan.operands().iter().zip(call.operands()).all(|(p, o)| {
                matches!(
                    (p.role(), o),
                    (OperandRole::Tensor, Operand::Tensor(_))
                        | (OperandRole::WeakScalar, Operand::Scalar(_))
                )
            });
        if !roles_match {
            return Err(Error::Value(format!(
                "the plan of '{name}' does not match the roles of the call's operands"
            )));
        }
        let results: Arc<[ResultSpec]> = results.into_iter().collect();
        if results.is_empty() {
            return Err(Error::Value(format!(
                "'{name}' must declare at least one result"
            )));
        }
        let saved: Arc<[usize]> = saved_operands.into_iter().collect();
        let indices = results
            .iter()
            .filter_map(ResultSpec::alias_of)
            .map(|i| ("alias_of", i));
        let mut seen_saved = Vec::new();
        for (what, i) in indices.chain(saved.iter().map(|&i| ("saved_operands", i))) {
            if call
                .operands()
                .get(i)
                .and_then(Operand::as_tensor)
                .is_none()
            {
                return Err(Error::Value(format!(
                    "{what} index {i} of '{name}' is not a tensor operand"
                )));
            }
            if what == "saved_operands" {
                if seen_saved.contains(&i) {
                    return Err(Error::Value(format!("'{name}' saves operand {i} twice")));
                }
                seen_saved.push(i);
            }
        }
        let kernel_id = kernel_id.unwrap_or(name);
        if kernel_id.is_empty() {
            return Err(Error::Value(format!("the kernel id of '{name}' is empty")));
        }
        Ok(ResolvedInvocation {
            call,
            plan,
            results,
            saved_operands: saved,
            kernel_id: kernel_id.into(),
        })
    }

    /// The bound call.
    pub fn call(&self) -> &BoundOperationCall {
        &self.call
    }

    /// The dtype plan.
    pub fn plan(&self) -> &OperationPlan {
        &self.plan
    }

    /// The result specifications, in result order.
    pub fn results(&self) -> &[ResultSpec] {
        &self.results
    }

    /// The operands saved for the backward pass.
    pub fn saved_operands(&self) -> &[usize] {
        &self.saved_operands
    }

    /// The kernel id (the operation name unless the resolver chose one).
    pub fn kernel_id(&self) -> &str {
        &self.kernel_id
    }
}
