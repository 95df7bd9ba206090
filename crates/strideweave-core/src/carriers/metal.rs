//! `Metal`: the shipped, closed, definition-free carrier class of Apple GPUs (seed: "Generic,
//! CPU, FileBacked, Evictable, BlockDeviceCarrier, and Metal SHALL remain definition-free").
//!
//! The core talks to no GPU. A Metal carrier keeps its slots in a *device carrier*: a carrier
//! of an independent, definition-backed class that a device crate opened on the Metal adapter
//! (`strideweave-wgpu`'s `metal` module uses its Gpu class on wgpu's Metal backend). The
//! Metal carrier owns that carrier for its whole life, so nothing else writes it; every
//! storage hook forwards to it. An operation on Metal tensors runs lowered on the device
//! carriers, through their class's own (checked) dispatch, and each result is wrapped in a new
//! Metal carrier. What a Metal carrier executes is what its device carrier executed when it
//! was wrapped (an instance snapshot, as for Evictable).
//!
//! Metal stays definition-free and shipped, so it is closed to carrier definitions, kernel
//! packs and capability declarations; it moves to and from the other definition-free classes
//! (the CPU) along the elementwise default route, one slot at a time.
//!
//! Invariants:
//! 1. The device carrier is owned by exactly one Metal carrier from construction until that
//!    carrier is dropped; aliases of it can read it but never write it.
//! 2. Size, dtype, mutability and the capability snapshot are fixed at construction.
//! 3. A write through the Metal carrier moves its version by exactly 1.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::autograd::no_grad;
use crate::carrier::{
    Carrier, CarrierClass, ClassKind, ClassOrigin, DefinitionFreeCarrier, OwnershipToken,
};
use crate::dtype::{accepts_storage_dtype, DType, Value};
use crate::error::{Error, Result};
use crate::operation::{
    operation_definition, Operand, Operation, OperationCapability, ResolvedInvocation,
};
use crate::tensor::Tensor;

/// The dtypes a Metal carrier stores (the original's: Float32, Int32 and Bool).
const STORABLE: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

/// A carrier on an Apple GPU, storing its slots in a device carrier on the Metal adapter.
///
/// Built by a device crate with [`Metal::over`]; a machine without a Metal adapter has no
/// way to build one (the Python package's `Metal(...)` is then a NotImplemented error).
pub struct Metal {
    device_class: CarrierClass,
    snapshot: Arc<[OperationCapability]>,
    device: OwnershipToken,
}

impl Metal {
    /// A Metal carrier over `device`, a live carrier of an independent definition-backed
    /// class on the Metal adapter, which it takes ownership of. Its size, dtype and
    /// mutability are the device carrier's, and it executes what the device carrier executes.
    ///
    /// The core cannot tell which adapter a device carrier lives on: a device crate calls
    /// this with a carrier it opened on the Metal adapter.
    ///
    /// # Errors
    /// Type for a Metal, definition-free or dependent device carrier; Value for a dtype other
    /// than Float32, Int32 and Bool; Runtime for a released or already owned one (nothing is
    /// then owned).
    pub fn over(device: &Carrier) -> Result<Carrier> {
        let body = Metal::holding(device)?;
        Carrier::new(body, device.dtype(), device.is_intrinsically_mutable())
    }

    /// The device carrier of the Metal carrier `carrier` (an alias: reads work, writes are
    /// refused because the Metal carrier owns it).
    ///
    /// # Errors
    /// Type when `carrier` is not a Metal carrier.
    pub fn device(carrier: &Carrier) -> Result<Carrier> {
        Ok(Metal::of(carrier)?.device.carrier().clone())
    }

    /// Checks `device` and takes ownership of it.
    fn holding(device: &Carrier) -> Result<Metal> {
        let class = device.class();
        if class == CarrierClass::of::<Metal>() {
            return Err(Error::Type(
                "a Metal carrier cannot keep its slots in another Metal carrier".into(),
            ));
        }
        if !class.is_definition_backed() || class.kind() != ClassKind::Independent {
            return Err(Error::Type(format!(
                "a Metal carrier keeps its slots in a carrier of an independent \
                 definition-backed device class on the Metal adapter, not in a {class} carrier"
            )));
        }
        let dtype = device.dtype();
        if !accepts_storage_dtype(dtype, &STORABLE) {
            return Err(Error::Value(format!(
                "Metal stores Float32, Int32 and Bool, not {dtype}"
            )));
        }
        let token = device.claim_ownership()?;
        Ok(Metal {
            device_class: class,
            snapshot: device.capabilities(),
            device: token,
        })
    }

    fn of(carrier: &Carrier) -> Result<&Metal> {
        carrier.downcast_ref::<Metal>().ok_or_else(|| {
            Error::Type(format!("expected a Metal carrier, got {}", carrier.class()))
        })
    }

    /// The device carrier.
    fn carrier(&self) -> &Carrier {
        self.device.carrier()
    }

    /// A Metal body over a fresh device carrier made like this one's.
    fn sibling(&self, device: &Carrier) -> Result<Metal> {
        let made = Metal::holding(device);
        if made.is_err() {
            // Best effort: the refusal is the error to report.
            let _ = device.release();
        }
        made
    }
}

impl DefinitionFreeCarrier for Metal {
    const NAME: &'static str = "Metal";
    const ORIGIN: ClassOrigin = ClassOrigin::SHIPPED;

    /// The framework asks [`try_supports_storage_dtype`](Self::try_supports_storage_dtype);
    /// this plain answer reads the device class's failing answer as "not supported".
    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        self.try_supports_storage_dtype(dtype).unwrap_or(false)
    }

    /// Float32, Int32 and Bool, where the device class stores them too.
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        Ok(accepts_storage_dtype(dtype, &STORABLE)
            && self.carrier().supports_storage_dtype(dtype)?)
    }

    fn size(&self) -> usize {
        self.carrier().size()
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        self.carrier().get(index)
    }

    /// One bulk read of the device carrier (a download of the slots asked for, for a device
    /// class with a bulk read).
    fn read_all(&self, indices: &[usize], _dtype: DType) -> Result<Vec<Value>> {
        self.carrier().get_all(indices)
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        let _access = self.device.access()?;
        self.carrier().set(index, value)
    }

    fn write_all(&self, writes: &[(usize, Value)], _dtype: DType) -> Result<()> {
        let _access = self.device.access()?;
        let device = self.carrier();
        device.check_writable("scatter")?;
        device.write_all(writes)
    }

    fn release(&self) -> Result<()> {
        let _access = self.device.access()?;
        self.carrier().release()
    }

    fn new_like(&self, values: &[Value], dtype: DType) -> Result<Self> {
        let device = self.carrier().new_like(values, true, Some(dtype))?;
        self.sibling(&device)
    }

    fn allocate_like(&self, size: usize, dtype: DType, empty: bool) -> Result<Self> {
        let device = self
            .carrier()
            .allocate_like(size, true, Some(dtype), empty)?;
        self.sibling(&device)
    }

    fn supports_scatter(&self) -> bool {
        self.carrier().supports_scatter()
    }

    fn check_scatter_source(
        &self,
        source: CarrierClass,
        source_dtype: DType,
        _dtype: DType,
    ) -> Result<()> {
        self.carrier().check_scatter_source(source, source_dtype)
    }

    fn instance_capabilities(&self) -> Option<Arc<[OperationCapability]>> {
        Some(Arc::clone(&self.snapshot))
    }

    /// A fresh operation that runs `name` lowered on the operands' device carriers (recording
    /// off) and wraps each fresh result into a new Metal carrier.
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        operation_definition(name).map_err(|_| {
            Error::NotImplemented(format!("Metal carriers dispatch no operation '{name}'"))
        })?;
        let device_class = self.device_class;
        let used = AtomicBool::new(false);
        Ok(Operation::new(move |invocation| {
            if used.swap(true, Ordering::AcqRel) {
                return Err(Error::Runtime(
                    "a Metal operation runs its forward only once".into(),
                ));
            }
            forward_lowered(invocation, device_class)
        }))
    }
}

/// The forward of a Metal operation: the call with every Metal tensor operand replaced by
/// the same view of its device carrier, run through the device class's dispatch; fresh
/// results become Metal carriers, declared aliases are the operands themselves.
fn forward_lowered(
    invocation: &ResolvedInvocation,
    device_class: CarrierClass,
) -> Result<Vec<Tensor>> {
    let call = invocation.call();
    let definition = call.definition();
    let name = definition.name();
    let mut lowered: Vec<Operand> = Vec::with_capacity(call.operands().len());
    for operand in call.operands() {
        let Some(tensor) = operand.as_tensor() else {
            lowered.push(operand.clone());
            continue;
        };
        let body = Metal::of(tensor.carrier()).map_err(|_| {
            Error::Type(format!(
                "'{name}' on Metal needs Metal operands, got a {} tensor",
                tensor.carrier().class()
            ))
        })?;
        if body.device_class != device_class {
            return Err(Error::Type(format!(
                "'{name}' on Metal needs operands on one device class: {device_class} and {}",
                body.device_class
            )));
        }
        lowered.push(Operand::Tensor(Tensor::new(
            body.carrier().clone(),
            tensor.offset(),
            tensor.layout().clone(),
        )?));
    }
    let option_names: Vec<&str> = definition
        .schema()
        .options()
        .iter()
        .map(|spec| spec.name())
        .collect();
    let options: Vec<(&str, _)> = option_names
        .iter()
        .filter_map(|n| call.option(n).map(|v| (*n, v)))
        .collect();
    let results = {
        let _grad = no_grad();
        definition.call(lowered, &options)?
    };
    results
        .iter()
        .zip(invocation.results())
        .map(|(result, spec)| match spec.alias_of() {
            Some(index) => call.tensor(index).cloned(),
            None => {
                let wrapped = Metal::over(result.carrier())?;
                Tensor::new(wrapped, result.offset(), result.layout().clone())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carriers::{Cpu, Generic};
    use crate::ErrorKind;

    #[test]
    fn metal_is_a_shipped_independent_definition_free_class() {
        let class = CarrierClass::of::<Metal>();
        assert_eq!(class.name(), "Metal");
        assert!(class.is_shipped());
        assert_eq!(class.kind(), ClassKind::Independent);
        assert!(!class.is_definition_backed());
    }

    #[test]
    fn metal_refuses_a_definition_free_or_metal_device_carrier() -> Result<()> {
        let cpu = Cpu::carrier(3, DType::FLOAT32, true, false)?;
        let error = Metal::over(&cpu).err().map(|e| (e.kind(), e.to_string()));
        assert_eq!(
            error,
            Some((
                ErrorKind::Type,
                "type error: a Metal carrier keeps its slots in a carrier of an independent \
                 definition-backed device class on the Metal adapter, not in a CPU carrier"
                    .to_string()
            ))
        );
        assert!(!cpu.is_owned());
        let generic = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true)?;
        assert_eq!(
            Metal::over(&generic).err().map(|e| e.kind()),
            Some(ErrorKind::Type)
        );
        assert_eq!(
            Metal::device(&cpu).err().map(|e| e.to_string()),
            Some("type error: expected a Metal carrier, got CPU".to_string())
        );
        Ok(())
    }
}
