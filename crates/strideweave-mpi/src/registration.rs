//! What this crate registers with StrideWeave, once per process: the `mpi.all_reduce`
//! operation, the capability of [`MpiHost`] to execute it, and the routes between the CPU
//! and [`MpiHost`].

use std::sync::{Arc, OnceLock};

use strideweave::carrier::{register_operation_capabilities, CarrierClass};
use strideweave::carriers::Cpu;
use strideweave::movement::register_move_operation;
use strideweave::operation::{OperationCapability, OperationDefinition};
use strideweave::{Error, Result};

use crate::host::{CpuToHost, HostToCpu, MpiHost};

static SETUP: OnceLock<std::result::Result<OperationDefinition, String>> = OnceLock::new();

/// Registers everything once; later calls return the first outcome.
///
/// # Errors
/// Runtime naming what could not be registered (for example another library that already
/// defined `mpi.all_reduce` or a route between the CPU and MpiHost).
pub(crate) fn setup() -> Result<OperationDefinition> {
    SETUP
        .get_or_init(|| register().map_err(|e| e.to_string()))
        .clone()
        .map_err(|message| {
            Error::Runtime(format!(
                "strideweave-mpi could not register its operation and routes: {message}"
            ))
        })
}

fn register() -> Result<OperationDefinition> {
    let definition = crate::all_reduce::define()?;
    let host = CarrierClass::of::<MpiHost>();
    register_operation_capabilities(
        host,
        [OperationCapability::from_plan(crate::all_reduce::plan()?)],
    )?;
    register_move_operation(CarrierClass::of::<Cpu>(), host, Arc::new(CpuToHost))?;
    register_move_operation(host, CarrierClass::of::<Cpu>(), Arc::new(HostToCpu))?;
    Ok(definition)
}
