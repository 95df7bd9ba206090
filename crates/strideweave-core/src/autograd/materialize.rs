//! Gradient buffers: fresh, detached storage of the target's exact carrier class
//! (docs/autograd.md, Backward).

use strideweave_layout::Layout;

use crate::dtype::Value;
use crate::error::{Error, ErrorKind, Result};
use crate::ops;
use crate::tensor::Tensor;

/// The gradient `grad` of `target` as a fresh tensor on a carrier of `target`'s class: with
/// `target`'s layout when it is injective, otherwise canonical with each storage slot's
/// summed contribution replicated to every coordinate of that slot.
pub(crate) fn materialize(target: &Tensor, grad: &Tensor) -> Result<Tensor> {
    if grad.shape() != target.shape() {
        return Err(Error::Value(format!(
            "a gradient of Shape {} cannot belong to a tensor of Shape {}",
            grad.shape(),
            target.shape()
        )));
    }
    let layout = target.layout();
    let canonical = Layout::column_major(target.shape().clone());
    let same_class = grad.carrier().class() == target.carrier().class();
    if layout.is_injective() {
        if same_class && grad.layout() == layout && grad.offset() == target.offset() {
            // A fresh gradient a dependent class built for this engine, laid out like its
            // target (a streamed tiled backward's), is kept as it is: copying it would
            // stream it once more.
            let adopted = grad
                .carrier()
                .composite_provider()
                .and_then(|composite| composite.autograd())
                .is_some_and(|hooks| hooks.adopt_gradient(grad));
            if adopted {
                return Ok(grad.clone());
            }
        }
        if *layout == canonical && same_class {
            // A multiplication by one is an exact copy into fresh canonical storage, on any
            // class that executes it.
            match ops::mul(grad, 1.0) {
                Err(e) if e.kind() == ErrorKind::NotImplemented => {}
                // A dependent class may compute onto another class (TiledEvictable's dense
                // results live on its primary tier's class): only a result of the target's
                // exact class is a gradient buffer; otherwise rebuild below.
                Ok(copied) if copied.carrier().class() != target.carrier().class() => {}
                copied => return copied,
            }
        }
        return rebuild(
            target,
            layout.clone(),
            grad.to_values()?.into_iter().enumerate().collect(),
        );
    }
    let values = grad.to_values()?;
    let mut sums: rustc_hash::FxHashMap<usize, f64> = rustc_hash::FxHashMap::default();
    let slots: Vec<usize> = (0..layout.size())
        .map(|i| layout.index_of(i))
        .collect::<std::result::Result<_, _>>()?;
    for (slot, value) in slots.iter().zip(&values) {
        *sums.entry(*slot).or_insert(0.0) += value.as_f64().unwrap_or(0.0);
    }
    let replicated: Vec<(usize, Value)> = slots
        .iter()
        .enumerate()
        .map(|(i, slot)| (i, Value::Float(sums.get(slot).copied().unwrap_or(0.0))))
        .collect();
    rebuild(target, canonical, replicated)
}

/// A fresh tensor of `layout` on a carrier of `target`'s class, holding `values[ordinal]`.
fn rebuild(target: &Tensor, layout: Layout, values: Vec<(usize, Value)>) -> Result<Tensor> {
    let mut slots = vec![Value::Float(0.0); layout.cosize()];
    for (ordinal, value) in values {
        let slot = layout.index_of(ordinal)?;
        if let Some(entry) = slots.get_mut(slot) {
            *entry = value;
        }
    }
    let carrier = target
        .carrier()
        .new_like(&slots, true, Some(target.dtype()))?;
    Tensor::new(carrier, 0, layout)
}

/// Gives back a gradient of a failed pass: a dependent class releases it when it built it
/// for the engine and nobody adopted it (`CompositeAutograd::discard_gradient`); any other
/// gradient is left to its drop, since it may be a tensor held outside the pass (a
/// cotangent a rule passed on unchanged).
pub(crate) fn discard(grad: &Tensor) {
    if let Some(hooks) = grad
        .carrier()
        .composite_provider()
        .and_then(|composite| composite.autograd())
    {
        hooks.discard_gradient(grad);
    }
}

/// `a + b` for two gradients of one shape: the dependent class's own sum when it has one
/// (`CompositeAutograd::add_gradients`), else the `add` operation where the class executes
/// it, otherwise value by value into fresh canonical storage of `a`'s class.
pub(crate) fn add_gradients(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.carrier().class() == b.carrier().class() {
        // A dependent class may sum its own gradients (TiledEvictable streams them).
        let summed = a
            .carrier()
            .composite_provider()
            .and_then(|composite| composite.autograd())
            .and_then(|hooks| hooks.add_gradients(a, b));
        if let Some(summed) = summed {
            return summed;
        }
    }
    match ops::add(a, b) {
        Err(e) if e.kind() == ErrorKind::NotImplemented => {
            let sums: Vec<Value> = a
                .to_values()?
                .iter()
                .zip(b.to_values()?)
                .map(|(x, y)| Value::Float(x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0)))
                .collect();
            let carrier = a.carrier().new_like(&sums, true, Some(a.dtype()))?;
            Tensor::compact(carrier, a.shape().clone())
        }
        summed => summed,
    }
}
