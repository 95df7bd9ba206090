//! The bulk routes CPU ↔ FileBacked, one contiguous byte copy of the tensor's `cosize`
//! slots, declared by the CPU and FileBacked classes in their `declare_class` hooks.

use crate::carriers::{Cpu, FileBacked};
use crate::error::{Error, Result};
use crate::movement::{MoveOperation, MoveTarget};
use crate::tensor::Tensor;

/// Bytes per slot of the dtypes both CPU and FileBacked store (Float32, Int32).
const SLOT_BYTES: usize = 4;

fn byte_range(source: &Tensor, element_count: usize) -> Result<std::ops::Range<usize>> {
    let start = source.offset().checked_mul(SLOT_BYTES);
    let length = element_count.checked_mul(SLOT_BYTES);
    match (start, length) {
        (Some(start), Some(length)) => Ok(start..start + length),
        _ => Err(Error::Value(format!(
            "a bulk move of {element_count} slots from offset {} overflows",
            source.offset()
        ))),
    }
}

fn wrong_class(route: &str, side: &str) -> Error {
    Error::ProviderContract(format!("the {route} route was given a non-{side} carrier"))
}

/// CPU → FileBacked: writes the source's slots into the file with one positioned write.
#[derive(Debug, Default)]
pub(crate) struct CpuToFileBacked;

impl MoveOperation for CpuToFileBacked {
    fn name(&self) -> &str {
        "bulk CPU->FileBacked"
    }

    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let range = byte_range(source, element_count)?;
        let cpu = source
            .carrier()
            .downcast_ref::<Cpu>()
            .ok_or_else(|| wrong_class(self.name(), "CPU"))?;
        let file = target
            .carrier()
            .downcast_ref::<FileBacked>()
            .ok_or_else(|| wrong_class(self.name(), "FileBacked"))?;
        target.keep_span(|| {
            let mut previous = vec![0u8; range.len()];
            file.read_bytes(0, &mut previous)?;
            let destination = target.carrier().clone();
            Ok(Box::new(move || {
                if let Some(file) = destination.downcast_ref::<FileBacked>() {
                    // Best effort: the move's own error is the one reported.
                    let _ = file.write_bytes(0, &previous);
                }
            }))
        })?;
        cpu.with_bytes(|bytes| match bytes.get(range.clone()) {
            Some(span) => file.write_bytes(0, span),
            None => Err(Error::Index(format!(
                "bytes {range:?} are outside the CPU carrier's {} bytes",
                bytes.len()
            ))),
        })?
    }
}

/// FileBacked → CPU: reads the source's slots from the file with one positioned read.
#[derive(Debug, Default)]
pub(crate) struct FileBackedToCpu;

impl MoveOperation for FileBackedToCpu {
    fn name(&self) -> &str {
        "bulk FileBacked->CPU"
    }

    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let range = byte_range(source, element_count)?;
        let file = source
            .carrier()
            .downcast_ref::<FileBacked>()
            .ok_or_else(|| wrong_class(self.name(), "FileBacked"))?;
        let cpu = target
            .carrier()
            .downcast_ref::<Cpu>()
            .ok_or_else(|| wrong_class(self.name(), "CPU"))?;
        target.keep_span(|| {
            // A destination too small is refused below, before anything is written.
            let previous =
                cpu.with_bytes(|bytes| bytes[..range.len().min(bytes.len())].to_vec())?;
            let destination = target.carrier().clone();
            Ok(Box::new(move || {
                if let Some(cpu) = destination.downcast_ref::<Cpu>() {
                    let _ = cpu
                        .with_bytes_mut(|bytes| bytes[..previous.len()].copy_from_slice(&previous));
                }
            }))
        })?;
        cpu.with_bytes_mut(|bytes| match bytes.get_mut(..range.len()) {
            Some(span) => file.read_bytes(range.start as u64, span),
            None => Err(Error::Index(format!(
                "the CPU carrier's {} bytes cannot hold {} bytes",
                bytes.len(),
                range.len()
            ))),
        })?
    }
}
