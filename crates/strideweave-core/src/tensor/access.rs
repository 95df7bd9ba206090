//! Element access through a tensor's layout.

use strideweave_layout::IntTuple;

use crate::dtype::Value;
use crate::error::Result;
use crate::limits;
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
    ///
    /// A view larger than this machine's memory can hold as values (a broadcast of one slot
    /// to 2^40 elements, say) is a Memory error before anything is allocated.
    pub fn to_values(&self) -> Result<Vec<Value>> {
        let what = || format!("the values of a tensor of shape {}", self.shape());
        limits::check_fits::<Value>(self.size(), what)?;
        let offset = self.offset();
        let mut slots = limits::reserve::<usize>(self.size(), what)?;
        slots.extend(self.layout().indices().map(|i| offset + i));
        self.carrier().get_all(&slots)
    }
}
