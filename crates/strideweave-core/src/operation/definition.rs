//! `OperationDefinition`: the immutable description of one operation, and the process-wide
//! registry of built-in and custom definitions (docs/operations.md, Operation definitions).

use std::fmt;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use crate::error::{quoted, Error, Result};
use crate::operation::builtin::{Builtin, PlanCache};
use crate::operation::invocation::{
    BoundOperationCall, BoundOption, BoundOptions, OperandList, ResolvedInvocation,
};
use crate::operation::schema::{OperandKind, OperationSchema, OptionValue};
use crate::operation::vjp::Vjp;
use crate::operation::Operand;
use crate::tensor::Tensor;

/// Resolves a bound call into a plan and result specifications.
pub type ResolveFn = dyn Fn(&BoundOperationCall) -> Result<ResolvedInvocation> + Send + Sync;

/// Computes an invocation's results with reference semantics.
pub type ReferenceFn = dyn Fn(&ResolvedInvocation) -> Result<Vec<Tensor>> + Send + Sync;

struct Inner {
    name: Arc<str>,
    schema: OperationSchema,
    /// Every option at its default, bound once: a call passing no options shares it (`None`
    /// when some option is required).
    default_options: Option<Box<[BoundOption]>>,
    resolver: Resolver,
    reference: Option<Box<ReferenceFn>>,
    /// The backward rule of a custom operation (built-ins carry theirs in their spec).
    vjp: Option<Vjp>,
    /// The typed identity of a built-in; `None` for a custom operation.
    builtin: Option<Builtin>,
}

/// How a definition resolves its calls.
enum Resolver {
    /// A built-in's shape rule and dtype planning, with its plan cache: it takes the bound
    /// call by value, so resolving moves the operands rather than cloning them.
    Builtin(Builtin, Box<PlanCache>),
    /// A custom operation's resolver.
    Custom(Box<ResolveFn>),
}

/// One operation: its name, schema and resolver. Immutable; copies share it and compare by
/// identity.
///
/// A definition is registered for the life of the process (names are never freed for
/// reuse), so it lives in static memory and copying a handle costs no reference count.
#[derive(Clone, Copy)]
pub struct OperationDefinition {
    inner: &'static Inner,
}

impl OperationDefinition {
    pub(crate) fn of_builtin(builtin: Builtin, schema: OperationSchema) -> Self {
        OperationDefinition {
            inner: Box::leak(Box::new(Inner {
                name: builtin.name().into(),
                default_options: default_options(&schema),
                schema,
                resolver: Resolver::Builtin(builtin, Box::default()),
                reference: None,
                vjp: None,
                builtin: Some(builtin),
            })),
        }
    }

    /// The operation name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The operation name, shared (plans, invocations and dispatched operations hold it
    /// without copying).
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.inner.name
    }

    /// The schema.
    pub fn schema(&self) -> &OperationSchema {
        &self.inner.schema
    }

    /// Whether StrideWeave defines it.
    pub fn is_builtin(&self) -> bool {
        self.inner.builtin.is_some()
    }

    /// The typed identity of a built-in operation; `None` for a custom one.
    pub fn builtin(&self) -> Option<Builtin> {
        self.inner.builtin
    }

    /// The reference implementation of a custom operation, if it has one.
    pub fn reference(&self) -> Option<&ReferenceFn> {
        self.inner.reference.as_deref()
    }

    /// The backward rule a custom operation declared, if any.
    pub fn vjp(&self) -> Option<&Vjp> {
        self.inner.vjp.as_ref()
    }

    /// Whether `self` and `other` are the same definition.
    pub fn same_as(&self, other: &OperationDefinition) -> bool {
        std::ptr::eq(self.inner, other.inner)
    }

    /// Binds `operands` (positional) and `options` (by name) against the schema: a Type
    /// error for a wrong count, an operand of the wrong kind, an unknown option or a missing
    /// required one; defaults are filled in.
    pub fn bind(
        &self,
        operands: Vec<Operand>,
        options: &[(&str, OptionValue)],
    ) -> Result<BoundOperationCall> {
        self.bind_list(operands.into(), options)
    }

    /// [`bind`](Self::bind) on operands held inline or in a vector.
    pub(crate) fn bind_list(
        &self,
        operands: OperandList,
        options: &[(&str, OptionValue)],
    ) -> Result<BoundOperationCall> {
        let name = self.name();
        let specs = self.schema().operands();
        let count = operands.as_slice().len();
        if count != specs.len() {
            return Err(Error::Type(format!(
                "'{name}' takes {} operands, got {count}",
                specs.len()
            )));
        }
        for (spec, operand) in specs.iter().zip(operands.as_slice()) {
            let fits = matches!(
                (spec.kind(), operand),
                (OperandKind::Tensor, Operand::Tensor(_))
                    | (OperandKind::WeakScalar, Operand::Scalar(_))
                    | (OperandKind::Structural, _)
            );
            if !fits {
                return Err(Error::Type(format!(
                    "operand '{}' of '{name}' must be a {:?} operand",
                    spec.name(),
                    spec.kind()
                )));
            }
        }
        if let Some((unknown, _)) = options
            .iter()
            .find(|(o, _)| !self.schema().options().iter().any(|s| s.name() == *o))
        {
            return Err(Error::Type(format!(
                "'{name}' has no option {}",
                quoted(unknown)
            )));
        }
        if options.is_empty() {
            if let Some(defaults) = &self.inner.default_options {
                return Ok(BoundOperationCall::new(
                    *self,
                    operands,
                    BoundOptions::Defaults(defaults),
                ));
            }
        }
        let mut bound = Vec::with_capacity(self.schema().options().len());
        for spec in self.schema().options() {
            let given = options
                .iter()
                .find(|(o, _)| *o == spec.name())
                .map(|(_, v)| *v);
            match given.or(spec.default()) {
                Some(value) => bound.push((Arc::from(spec.name()), value)),
                None => {
                    return Err(Error::Type(format!(
                        "'{name}' needs the option '{}'",
                        spec.name()
                    )))
                }
            }
        }
        Ok(BoundOperationCall::new(
            *self,
            operands,
            BoundOptions::Given(bound.into()),
        ))
    }

    /// Resolves a bound call of this definition.
    pub fn resolve(&self, call: &BoundOperationCall) -> Result<ResolvedInvocation> {
        if !call.definition().same_as(self) {
            return Err(Error::Value(format!(
                "'{}' cannot resolve a call of '{}'",
                self.name(),
                call.definition().name()
            )));
        }
        self.resolve_owned(call.clone())
    }

    /// [`resolve`](Self::resolve) of a call this definition bound: a built-in resolves it by
    /// value (its operands move into the invocation); a custom resolver borrows it.
    ///
    /// A released tensor operand is refused first, before any resolver runs and before any
    /// alias or recording rule applies (Runtime, naming the operation and the class).
    #[inline]
    pub(crate) fn resolve_owned(&self, call: BoundOperationCall) -> Result<ResolvedInvocation> {
        for tensor in call.operands().iter().filter_map(Operand::as_tensor) {
            if tensor.carrier().is_released() {
                return Err(released_operand(self.name(), tensor));
            }
        }
        let invocation = match &self.inner.resolver {
            Resolver::Builtin(builtin, plans) => {
                return crate::operation::builtin::resolve(*builtin, plans, call)
            }
            Resolver::Custom(resolve) => resolve(&call)?,
        };
        if !invocation.call().definition().same_as(self) {
            return Err(Error::Value(format!(
                "the resolver of '{}' returned an invocation of '{}'",
                self.name(),
                invocation.call().definition().name()
            )));
        }
        Ok(invocation)
    }
}

/// The refusal of a call of `name` whose operand `tensor` lives on a released carrier.
#[cold]
fn released_operand(name: &str, tensor: &Tensor) -> Error {
    Error::Runtime(format!(
        "cannot compute '{name}': an operand's {} carrier is released",
        tensor.carrier().class()
    ))
}

/// Every option of `schema` bound to its default, or `None` when one has no default.
fn default_options(schema: &OperationSchema) -> Option<Box<[BoundOption]>> {
    schema
        .options()
        .iter()
        .map(|spec| Some((Arc::from(spec.name()), spec.default()?)))
        .collect()
}

impl fmt::Debug for OperationDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperationDefinition({})", self.name())
    }
}

/// Keyed by name with the Fx hash: names are short, and the look-up runs on every call.
static REGISTRY: LazyLock<RwLock<FxHashMap<Arc<str>, OperationDefinition>>> = LazyLock::new(|| {
    let builtins = crate::operation::builtin::definitions();
    RwLock::new(
        builtins
            .into_iter()
            .map(|d| (Arc::clone(&d.inner.name), d))
            .collect(),
    )
});

/// Defines the custom operation `name` once for the life of the process.
///
/// `name` has at least two dot-separated identifier segments whose first is neither
/// `strideweave` nor a built-in operation name (`mylib.scale`); an invalid, reserved or taken
/// name is a Value error, as is a `resolve` returning an invocation of another definition
/// at call time. `vjp` is required: a rule, or [`Vjp::NonDifferentiable`].
pub fn define_operation(
    name: &str,
    schema: OperationSchema,
    resolve: impl Fn(&BoundOperationCall) -> Result<ResolvedInvocation> + Send + Sync + 'static,
    reference: Option<Box<ReferenceFn>>,
    vjp: Vjp,
) -> Result<OperationDefinition> {
    let segments: Vec<&str> = name.split('.').collect();
    let identifier = |s: &&str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if segments.len() < 2 || !segments.iter().all(identifier) {
        return Err(Error::Value(format!(
            "a custom operation name needs at least two dot-separated identifiers ('mylib.op'), got {}",
            quoted(name)
        )));
    }
    let first = segments[0];
    if first == "strideweave" || Builtin::from_name(first).is_some() {
        return Err(Error::Value(format!(
            "custom operation {name:?} uses the reserved namespace '{first}'"
        )));
    }
    let mut registry = REGISTRY.write().unwrap_or_else(PoisonError::into_inner);
    if registry.contains_key(name) {
        return Err(Error::Value(format!(
            "an operation named {name:?} is already defined"
        )));
    }
    // Only a definition that is registered is given static storage.
    let definition = OperationDefinition {
        inner: Box::leak(Box::new(Inner {
            name: name.into(),
            default_options: default_options(&schema),
            schema,
            resolver: Resolver::Custom(Box::new(resolve)),
            reference,
            vjp: Some(vjp),
            builtin: None,
        })),
    };
    registry.insert(Arc::clone(&definition.inner.name), definition);
    Ok(definition)
}

/// The registered definition named `name`; NotImplemented for an unknown name.
pub fn operation_definition(name: &str) -> Result<OperationDefinition> {
    REGISTRY
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
        .cloned()
        .ok_or_else(|| {
            Error::NotImplemented(format!("no operation named {} is defined", quoted(name)))
        })
}

/// Every registered definition, sorted by name.
pub fn operation_definitions() -> Vec<OperationDefinition> {
    let mut all: Vec<OperationDefinition> = REGISTRY
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .cloned()
        .collect();
    all.sort_by(|a, b| a.name().cmp(b.name()));
    all
}
