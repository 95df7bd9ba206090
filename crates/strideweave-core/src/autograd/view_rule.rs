//! The one backward rule of every zero-copy view: gradients travel through storage slots
//! (docs/autograd-design.md, "Rules").

use rustc_hash::FxHashMap;
use strideweave_layout::Layout;

use crate::autograd::grad_mode::is_grad_enabled;
use crate::autograd::node::{BackwardRule, Node};
use crate::dtype::Value;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Records `view` (just made from `source`) in the graph when `source` requires gradients.
pub(crate) fn record_view(name: &'static str, source: &Tensor, view: Tensor) -> Tensor {
    if is_grad_enabled() && source.is_differentiable() && source.requires_grad() {
        let rule = ViewRule {
            offset: view.offset(),
            layout: view.layout().clone(),
        };
        let node = Node::new(name.into(), vec![source.clone()], 1, Box::new(rule));
        view.mark_tracked();
        view.autograd().lock().grad_fn = Some((node, 0));
    }
    view
}

/// The view's placement over the shared carrier; the source's comes from the saved input.
struct ViewRule {
    offset: usize,
    layout: Layout,
}

impl BackwardRule for ViewRule {
    /// Sums the cotangent per storage slot the view reads, then reads those sums back
    /// through the source's layout (a slot that several source coordinates share gives its
    /// sum to the first of them).
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let (Some(source), Some(Some(g))) = (inputs.first(), grad_outputs.first()) else {
            return Ok(vec![None; inputs.len()]);
        };
        let mut sums: FxHashMap<usize, f64> = FxHashMap::default();
        for (i, value) in g.to_values()?.into_iter().enumerate() {
            let slot = self.offset + self.layout.index_of(i)?;
            *sums.entry(slot).or_insert(0.0) += value.as_f64().unwrap_or(0.0);
        }
        let mut values = Vec::with_capacity(source.size());
        for j in 0..source.size() {
            let slot = source.offset() + source.layout().index_of(j)?;
            values.push(Value::Float(sums.remove(&slot).unwrap_or(0.0)));
        }
        let carrier = g
            .carrier()
            .new_like(&values, true, Some(source.dtype()))
            .map_err(|e| {
                Error::Runtime(format!("the gradient of a view could not be stored: {e}"))
            })?;
        Ok(vec![Some(Tensor::compact(
            carrier,
            source.shape().clone(),
        )?)])
    }
}

/// Records a move of `source` to `moved` when `source` requires gradients: the cotangent
/// travels back to fresh storage of the source's carrier class. `grad_enabled` is the
/// recording mode of the thread that started the move (an asynchronous move may commit on
/// another thread).
pub(crate) fn record_move(source: &Tensor, moved: &Tensor, grad_enabled: bool) {
    if grad_enabled && source.is_differentiable() && source.requires_grad() {
        let node = Node::new("move".into(), vec![source.clone()], 1, Box::new(MoveRule));
        moved.mark_tracked();
        moved.autograd().lock().grad_fn = Some((node, 0));
    }
}

/// The backward rule of a move (docs/autograd.md, Moves and copies).
struct MoveRule;

impl BackwardRule for MoveRule {
    /// The cotangent must be an injective tensor of the source's shape (a Value error
    /// otherwise); its values return in fresh storage of the source's exact carrier class.
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let (Some(source), Some(Some(g))) = (inputs.first(), grad_outputs.first()) else {
            return Ok(vec![None; inputs.len()]);
        };
        if g.shape() != source.shape() || !g.layout().is_injective() {
            return Err(Error::Value(format!(
                "the cotangent of a move must be an injective tensor of Shape {}, got layout {}",
                source.shape(),
                g.layout()
            )));
        }
        // The cotangent goes back along the route the move checked before it started, into
        // fresh storage of the source's class (a released carrier is still a valid prototype
        // for its class's factories).
        let fresh = source.carrier().allocate_like(
            g.layout().cosize(),
            true,
            Some(source.dtype()),
            true,
        )?;
        Ok(vec![Some(crate::movement::copy_to_scratch(g, &fresh)?)])
    }
}
