//! Operation schemas: the operands and options an operation takes
//! (docs/operations.md, Operation definitions).

use std::sync::Arc;

use crate::dtype::{DType, Value};
use crate::error::{Error, Result};

/// What kind of operand a schema position takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperandKind {
    /// A tensor.
    Tensor,
    /// A Rust scalar adopting its tensor partner's kind.
    WeakScalar,
    /// Either, passed through to resolution (`mul`'s tensor-or-scalar operands).
    Structural,
}

/// One operand position: its name, kind, and whether gradients flow to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperandSpec {
    name: Arc<str>,
    kind: OperandKind,
    differentiable: bool,
}

fn check_identifier(name: &str, what: &str) -> Result<()> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(Error::Value(format!(
            "{what} name {name:?} is not an identifier"
        )));
    }
    Ok(())
}

impl OperandSpec {
    /// An operand named `name` (an identifier) of `kind`; only tensor operands may be
    /// differentiable (Value error otherwise).
    pub fn new(name: &str, kind: OperandKind, differentiable: bool) -> Result<OperandSpec> {
        check_identifier(name, "operand")?;
        if differentiable && kind != OperandKind::Tensor {
            return Err(Error::Value(format!(
                "operand '{name}' of kind {kind:?} cannot be differentiable: only tensor operands are"
            )));
        }
        Ok(OperandSpec {
            name: name.into(),
            kind,
            differentiable,
        })
    }

    /// The operand name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operand kind.
    pub fn kind(&self) -> OperandKind {
        self.kind
    }

    /// Whether gradients flow to this operand.
    pub fn is_differentiable(&self) -> bool {
        self.differentiable
    }
}

/// The value of an option.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptionValue {
    /// No value (the default of an optional dtype option).
    None,
    /// A dtype, such as an accumulator dtype.
    DType(DType),
    /// A scalar.
    Value(Value),
}

/// One option: its name and its default, or `None` when it is required.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionSpec {
    name: Arc<str>,
    default: Option<OptionValue>,
}

impl OptionSpec {
    /// An option named `name` (an identifier) with `default`; `None` makes it required.
    pub fn new(name: &str, default: Option<OptionValue>) -> Result<OptionSpec> {
        check_identifier(name, "option")?;
        Ok(OptionSpec {
            name: name.into(),
            default,
        })
    }

    /// The option name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The default, or `None` when required.
    pub fn default(&self) -> Option<OptionValue> {
        self.default
    }
}

/// The operands (non-empty, unique names) and options of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationSchema {
    operands: Arc<[OperandSpec]>,
    options: Arc<[OptionSpec]>,
}

impl OperationSchema {
    /// A schema; a Value error for no operands or a repeated name.
    pub fn new(
        operands: impl IntoIterator<Item = OperandSpec>,
        options: impl IntoIterator<Item = OptionSpec>,
    ) -> Result<OperationSchema> {
        let operands: Arc<[OperandSpec]> = operands.into_iter().collect();
        let options: Arc<[OptionSpec]> = options.into_iter().collect();
        if operands.is_empty() {
            return Err(Error::Value(
                "an operation schema needs at least one operand".into(),
            ));
        }
        let mut names: Vec<&str> = operands
            .iter()
            .map(OperandSpec::name)
            .chain(options.iter().map(OptionSpec::name))
            .collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Value(format!(
                "an operation schema names '{}' twice",
                pair[0]
            )));
        }
        Ok(OperationSchema { operands, options })
    }

    /// The operand positions.
    pub fn operands(&self) -> &[OperandSpec] {
        &self.operands
    }

    /// The options.
    pub fn options(&self) -> &[OptionSpec] {
        &self.options
    }
}
