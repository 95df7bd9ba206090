//! The exact-class-pair registry of move operations for definition-free carriers.
//!
//! Keys are `(source class, destination class)` with no inheritance; a duplicate
//! registration is a Value error, unregistering a missing pair a Key error.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use crate::carrier::CarrierClass;
use crate::error::{Error, Result};
use crate::movement::MoveOperation;

type Routes = HashMap<(CarrierClass, CarrierClass), Arc<dyn MoveOperation>>;

/// The registered routes, the shipped ones included (each shipped class declares the routes
/// from it in its `declare_class` hook).
static ROUTES: LazyLock<RwLock<Routes>> = LazyLock::new(|| RwLock::new(Routes::new()));

/// The classes whose routes are fixed, with what they move to (BlockDeviceCarrier "moves
/// only to and from CPU"): no pair with such an end is registered, unregistered or copied
/// elementwise.
static FIXED: LazyLock<RwLock<HashMap<CarrierClass, &'static str>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// Runs both classes' own declaration hooks before the registry answers about the pair.
fn declare_pair(source: CarrierClass, destination: CarrierClass) {
    source.declare_once();
    destination.declare_once();
}

/// The first end of the pair whose routes are fixed, with what it moves to.
fn fixed_end(
    source: CarrierClass,
    destination: CarrierClass,
) -> Option<(CarrierClass, &'static str)> {
    let fixed = FIXED.read().unwrap_or_else(PoisonError::into_inner);
    [source, destination]
        .into_iter()
        .find_map(|class| fixed.get(&class).map(|&moves| (class, moves)))
}

/// Refuses a move between `source` and `destination` that has no registered route when
/// either end's routes are fixed: such a pair has no elementwise fallback.
///
/// # Errors
/// NotImplemented naming the pair and the fixed class.
pub(crate) fn refuse_unrouted_fixed_pair(
    source: CarrierClass,
    destination: CarrierClass,
) -> Result<()> {
    declare_pair(source, destination);
    if let Some((fixed, moves)) = fixed_end(source, destination) {
        return Err(Error::NotImplemented(format!(
            "no move route from {source} to {destination}: {fixed} {moves}"
        )));
    }
    Ok(())
}

/// Refuses a change to the move registry for a pair with an end whose routes are fixed.
///
/// # Errors
/// A Value error naming the pair and the fixed class.
pub(crate) fn refuse_fixed_registry_change(
    source: CarrierClass,
    destination: CarrierClass,
) -> Result<()> {
    declare_pair(source, destination);
    if let Some((fixed, _)) = fixed_end(source, destination) {
        return Err(Error::Value(format!(
            "the move routes of {fixed} are fixed: the route from {source} to {destination} \
             cannot be registered or unregistered"
        )));
    }
    Ok(())
}

/// Fixes the routes of the shipped `class` to those it declares itself, `moves` saying where
/// it moves ("moves only to and from CPU"), from its own declaration hook. A Type error for
/// a class that is not shipped.
pub(crate) fn declare_fixed_routes(class: CarrierClass, moves: &'static str) -> Result<()> {
    if !class.is_shipped() {
        return Err(Error::Type(format!(
            "{class} is not a shipped carrier class: its move routes cannot be fixed"
        )));
    }
    FIXED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(class, moves);
    Ok(())
}

/// Registers `operation` as the route from the shipped class `source` to `destination`, from
/// the source's own declaration hook: [`register_move_operation`] without the fixed-route
/// refusal (the shipped class's own routes are the fixed ones). A Type error for a source
/// that is not shipped, a Value error for a pair already registered.
pub(crate) fn declare_shipped_move_operation(
    source: CarrierClass,
    destination: CarrierClass,
    operation: Arc<dyn MoveOperation>,
) -> Result<()> {
    if !source.is_shipped() {
        return Err(Error::Type(format!(
            "{source} is not a shipped carrier class: register its routes with \
             register_move_operation"
        )));
    }
    insert_route(source, destination, operation)
}

/// Inserts the route, sealing both classes against a carrier definition; a Value error for a
/// pair already registered.
fn insert_route(
    source: CarrierClass,
    destination: CarrierClass,
    operation: Arc<dyn MoveOperation>,
) -> Result<()> {
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

/// Registers `operation` as the route from `source` to `destination` (exact classes).
///
/// A Value error for a pair already registered, or with an end whose routes are fixed
/// (BlockDeviceCarrier's); a Runtime error naming `TransferRoute` when either class is
/// definition-backed (it moves only by its definition). A registered route seals both classes
/// against a carrier definition.
pub fn register_move_operation(
    source: CarrierClass,
    destination: CarrierClass,
    operation: Arc<dyn MoveOperation>,
) -> Result<()> {
    refuse_fixed_registry_change(source, destination)?;
    for class in [source, destination] {
        if class.is_definition_backed() {
            return Err(Error::Runtime(format!(
                "cannot register a move operation from {source} to {destination}: {class} is a \
                 definition-backed carrier class, which moves only through its definition's \
                 TransferRoute values"
            )));
        }
    }
    insert_route(source, destination, operation)
}

/// Removes the route from `source` to `destination`; a Key error when there is none, a
/// Value error for a pair with an end whose routes are fixed (BlockDeviceCarrier's).
pub fn unregister_move_operation(source: CarrierClass, destination: CarrierClass) -> Result<()> {
    refuse_fixed_registry_change(source, destination)?;
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
    declare_pair(source, destination);
    ROUTES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(source, destination))
        .cloned()
}
