//! `Generic`: the behavioural reference carrier, holding normalized scalar values.

use crate::carrier::CarrierClass;
use crate::internal;
use std::sync::{PoisonError, RwLock};

use crate::carrier::{Carrier, ClassOrigin, DefinitionFreeCarrier};
use crate::dtype::{accepts_storage_dtype, DType, Value};
use crate::error::{quoted, Error, Result};
use crate::operation::{Builtin, BuiltinKernel, Operation};

const STORABLE: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

/// The reference carrier: a vector of normalized [`Value`]s (Float32, Int32 or Bool).
///
/// It defines the observable behaviour every other carrier is compared with: values are
/// normalized on the way in (Float32 rounds to binary32, Int32 is range-checked, Bool is
/// exact) and scatter is atomic.
#[derive(Debug)]
pub struct Generic {
    values: RwLock<Vec<Value>>,
}

impl Generic {
    /// A mutable or immutable Generic carrier holding `values`, normalized to `dtype`.
    ///
    /// ```
    /// use strideweave::carriers::Generic;
    /// use strideweave::{DType, Value};
    /// let carrier = Generic::carrier(&[1.0.into(), 2.0.into(), 3.0.into()], DType::FLOAT32, true)?;
    /// carrier.set(1, Value::Float(0.1))?;
    /// assert_eq!(carrier.get(1)?, Value::Float(0.10000000149011612));
    /// assert_eq!(carrier.version(), 1);
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn carrier(values: &[Value], dtype: DType, mutable: bool) -> Result<Carrier> {
        crate::dtype::validate_storage_dtype(dtype, "Generic", &STORABLE)?;
        let normalized = values
            .iter()
            .map(|v| dtype.normalize(*v))
            .collect::<Result<Vec<_>>>()?;
        Carrier::new(Generic::holding(normalized), dtype, mutable)
    }

    fn holding(values: Vec<Value>) -> Generic {
        Generic {
            values: RwLock::new(values),
        }
    }
}

impl DefinitionFreeCarrier for Generic {
    const NAME: &'static str = "Generic";
    const ORIGIN: ClassOrigin = ClassOrigin::SHIPPED;

    /// Generic executes every plan of the built-in operations (its reference kernels).
    fn declare_class(class: CarrierClass) {
        // A shipped class declares once, before any query of it, so this cannot be refused.
        let _ = internal::declare_shipped_capabilities(
            class,
            internal::builtin_capabilities().iter().cloned(),
        );
    }

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        accepts_storage_dtype(dtype, &STORABLE)
    }

    fn size(&self) -> usize {
        self.values
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let values = self.values.read().unwrap_or_else(PoisonError::into_inner);
        values.get(index).copied().ok_or_else(|| vanished(index))
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        *values.get_mut(index).ok_or_else(|| vanished(index))? = value;
        Ok(())
    }

    fn write_all(&self, writes: &[(usize, Value)], _dtype: DType) -> Result<()> {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(&(index, _)) = writes.iter().find(|(i, _)| *i >= values.len()) {
            return Err(vanished(index));
        }
        for &(index, value) in writes {
            values[index] = value;
        }
        Ok(())
    }

    fn release(&self) -> Result<()> {
        *self.values.write().unwrap_or_else(PoisonError::into_inner) = Vec::new();
        Ok(())
    }

    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Generic::holding(values.to_vec()))
    }

    fn allocate_like(&self, size: usize, dtype: DType, _empty: bool) -> Result<Self> {
        let zero = dtype.zero().unwrap_or(Value::Bool(false));
        let mut values =
            crate::limits::reserve(size, || format!("the slots of a {} carrier", Self::NAME))?;
        values.resize(size, zero);
        Ok(Generic::holding(values))
    }

    /// The reference kernels (docs/kernel-semantics.md) of every built-in.
    fn builtin_kernel(&self) -> Option<BuiltinKernel> {
        Some(crate::kernels::reference::execute)
    }

    /// A fresh [`Operation`] running the reference kernel of the built-in `name`;
    /// NotImplemented for any other name.
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        let Some(builtin) = Builtin::from_name(name) else {
            return Err(Error::NotImplemented(format!(
                "Generic carriers dispatch no operation {} (only the built-in operations)",
                quoted(name)
            )));
        };
        Ok(Operation::new(move |invocation| {
            crate::kernels::reference::execute(builtin, invocation).map(|result| vec![result])
        }))
    }
}

/// A slot that passed the framework's range check but is gone: a concurrent release.
fn vanished(index: usize) -> Error {
    Error::Runtime(format!(
        "slot {index} of a Generic carrier vanished: it was released concurrently"
    ))
}
