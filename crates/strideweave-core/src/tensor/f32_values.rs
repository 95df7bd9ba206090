//! Float32 element values in and out of a tensor as plain `f32`s.

use crate::carriers::Cpu;
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use strideweave_layout::Shape;

impl Tensor {
    /// A compact (column-major) tensor of `shape` on a fresh mutable CPU carrier holding
    /// `values` in colexicographic order. Value error when the count differs from the shape's
    /// size.
    ///
    /// ```
    /// use strideweave::{Shape, Tensor};
    /// let t = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0], Shape::new((2, 2))?)?;
    /// assert_eq!(t.to_f32_vec()?, [1.0, 2.0, 3.0, 4.0]);
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn from_f32(values: &[f32], shape: Shape) -> Result<Tensor> {
        if values.len() != shape.size() {
            return Err(Error::Value(format!(
                "{} values for a tensor of Shape {shape} ({} elements)",
                values.len(),
                shape.size()
            )));
        }
        Tensor::compact(Cpu::from_f32(values, true)?, shape)
    }

    /// The elements of a Float32 tensor in colexicographic order, as `f32`s. Type error for
    /// another dtype; otherwise the errors of reading the carrier.
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        self.require_float32("to_f32_vec")?;
        self.to_values()?
            .into_iter()
            .map(|v| match v {
                Value::Float(x) => Ok(x as f32),
                other => Err(Error::Type(format!(
                    "a Float32 carrier read {} value {other}",
                    other.type_name()
                ))),
            })
            .collect()
    }

    /// Writes `values`, one per element in colexicographic order, into this Float32 tensor's
    /// slots (one version step per write). Type error for another dtype, Value error for a
    /// count other than the tensor's size, both before anything is written; then the errors
    /// of writing the carrier.
    pub fn write_f32(&self, values: &[f32]) -> Result<()> {
        self.require_float32("write_f32")?;
        if values.len() != self.size() {
            return Err(Error::Value(format!(
                "{} values for a tensor of {} elements",
                values.len(),
                self.size()
            )));
        }
        for (ordinal, value) in values.iter().enumerate() {
            let slot = self.offset() + self.layout().index_of(ordinal)?;
            self.carrier().set(slot, Value::Float(f64::from(*value)))?;
        }
        Ok(())
    }

    fn require_float32(&self, what: &str) -> Result<()> {
        if self.dtype() == DType::FLOAT32 {
            Ok(())
        } else {
            Err(Error::Type(format!(
                "{what} needs a Float32 tensor, got {}",
                self.dtype()
            )))
        }
    }
}
