//! The exact-class-pair registry of move operations for definition-free carriers.
//!
//! Keys are `(source class, destination class)` with no inheritance; a duplicate
//! registration is a Value error, unregistering a missing pair a Key error.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use crate::carrier::CarrierClass;
use crate::carriers::{BlockDeviceCarrier, Cpu, FileBacked};
use crate::error::{Error, Result};
use crate::movement::block::{refuse_block_registry_change, BlockDeviceToCpu, CpuToBlockDevice};
use crate::movement::bulk::{CpuToFileBacked, FileBackedToCpu};
use crate::movement::MoveOperation;

type Routes = HashMap<(CarrierClass, CarrierClass), Arc<dyn MoveOperation>>;

static ROUTES: LazyLock<RwLock<Routes>> = LazyLock::new(|| RwLock::new(shipped_routes()));

/// The bulk routes StrideWeave ships: CPU ↔ FileBacked and CPU ↔ BlockDeviceCarrier.
fn shipped_routes() -> Routes {
    let cpu = CarrierClass::of::<Cpu>();
    let file = CarrierClass::of::<FileBacked>();
    let block = CarrierClass::of::<BlockDeviceCarrier>();
    let mut routes = Routes::new();
    routes.insert((cpu, file), Arc::new(CpuToFileBacked));
    routes.insert((file, cpu), Arc::new(FileBackedToCpu));
    routes.insert((cpu, block), Arc::new(CpuToBlockDevice));
    routes.insert((block, cpu), Arc::new(BlockDeviceToCpu));
    routes
}

/// Registers `operation` as the route from `source` to `destination` (exact classes).
///
/// A Value error for a pair already registered, or with a BlockDeviceCarrier end (its
/// routes are fixed); a Runtime error naming `TransferRoute` when either class is
/// definition-backed (it moves only by its definition). A registered route seals both classes
/// against a carrier definition.
pub fn register_move_operation(
    source: CarrierClass,
    destination: CarrierClass,
    operation: Arc<dyn MoveOperation>,
) -> Result<()> {
    refuse_block_registry_change(source, destination)?;
    for class in [source, destination] {
        if class.is_definition_backed() {
            return Err(Error::Runtime(format!(
                "cannot register a move operation from {source} to {destination}: {class} is a \
                 definition-backed carrier class, which moves only through its definition's \
                 TransferRoute values"
            )));
        }
    }
    let mut routes = ROUTES.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = routes.get(&(source, destination)) {
        return Err(Error::Value(format!(
            "a move operation ({}) is already registered from {source} to {destination}",
            existing.name()
        )));
    }
    // The route gives both classes definition-free movement authority: seal them against a
    // carrier definition (a Type error if one won the class meanwhile).
    source.observe_definition_free("register a move operation")?;
    destination.observe_definition_free("register a move operation")?;
    routes.insert((source, destination), operation);
    Ok(())
}

/// Removes the route from `source` to `destination`; a Key error when there is none, a
/// Value error for a pair with a BlockDeviceCarrier end (its routes are fixed).
pub fn unregister_move_operation(source: CarrierClass, destination: CarrierClass) -> Result<()> {
    refuse_block_registry_change(source, destination)?;
    let mut routes = ROUTES.write().unwrap_or_else(PoisonError::into_inner);
    match routes.remove(&(source, destination)) {
        Some(_) => Ok(()),
        None => Err(Error::Key(format!(
            "no move operation is registered from {source} to {destination}"
        ))),
    }
}

/// The route registered from `source` to `destination`, if any.
pub fn registered_move_operation(
    source: CarrierClass,
    destination: CarrierClass,
) -> Option<Arc<dyn MoveOperation>> {
    ROUTES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(source, destination))
        .cloned()
}
