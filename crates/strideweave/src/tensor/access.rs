//! Element access through a tensor's layout.

use strideweave_layout::IntTuple;

use crate::dtype::Value;
use crate::error::Result;
use crate::tensor::Tensor;

impl Tensor {
    /// The value at `coord` (an integer may stand for any subtree). Out-of-domain or
    /// negative keys are Value errors; a released carrier is a Runtime error.
    pub fn get(&self, coord: &IntTuple) -> Result<Value> {
        let slot = self.offset() + self.layout().index(coord)?;
        self.carrier().get(slot)
    }

    /// Writes `value` at `coord` and bumps the carrier's version by 1.
    pub fn set(&self, coord: &IntTuple, value: Value) -> Result<()> {
        let slot = self.offset() + self.layout().index(coord)?;
        self.carrier().set(slot, value)
    }

    /// The value at a coordinate given as one integer per leaf: the fast path.
    pub fn get_leaves(&self, coords: &[usize]) -> Result<Value> {
        let slot = self.offset() + self.layout().index_of_leaves(coords)?;
        self.carrier().get(slot)
    }

    /// Writes `value` at a coordinate given as one integer per leaf.
    pub fn set_leaves(&self, coords: &[usize], value: Value) -> Result<()> {
        let slot = self.offset() + self.layout().index_of_leaves(coords)?;
        self.carrier().set(slot, value)
    }

    /// Every value in colexicographic order of the coordinates.
    pub fn to_values(&self) -> Result<Vec<Value>> {
        let offset = self.offset();
        let slots: Vec<usize> = self.layout().indices().map(|i| offset + i).collect();
        self.carrier().get_all(&slots)
    }
}
