//! The backward engine shared by `Tensor::backward` and `autograd::grad`
//! (docs/autograd.md, Backward; docs/autograd-design.md, "The engine").
//!
//! Iterative throughout (no recursion, so deep chains cannot overflow the stack). Nothing is
//! assigned and no node is released unless the whole pass succeeded.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::autograd::grad_mode::no_grad;
use crate::autograd::materialize::{add_gradients, discard, materialize};
use crate::autograd::node::Node;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The identity of a tensor object.
fn key(tensor: &Tensor) -> usize {
    tensor.identity()
}

/// Gradients being summed per tensor object.
#[derive(Default)]
struct Sums {
    entries: FxHashMap<usize, (Tensor, Tensor)>,
    order: Vec<usize>,
}

impl Sums {
    fn add(&mut self, target: &Tensor, grad: Tensor) -> Result<()> {
        let k = key(target);
        match self.entries.get_mut(&k) {
            Some((_, sum)) => match add_gradients(sum, &grad) {
                Ok(total) => *sum = total,
                Err(error) => {
                    // The pass fails: the contribution that could not be summed is given
                    // back with the others (`discard_all`).
                    discard(&grad);
                    return Err(error);
                }
            },
            None => {
                self.entries.insert(k, (target.clone(), grad));
                self.order.push(k);
            }
        }
        Ok(())
    }

    /// Gives back every gradient held, the pass having failed.
    fn discard_all(&self) {
        self.entries.values().for_each(|(_, grad)| discard(grad));
    }

    fn into_ordered(mut self) -> Vec<(Tensor, Tensor)> {
        self.order
            .iter()
            .filter_map(|k| self.entries.remove(k))
            .collect()
    }
}

/// What a pass produces.
pub(crate) enum Outcome {
    /// Gradients were added to `.grad` of the leaves (and retaining non-leaves).
    Accumulated,
    /// The gradients of the requested inputs (`None` where unreachable).
    Captured(Vec<Option<Tensor>>),
}

/// Runs one backward pass from `roots` (each with its validated cotangent).
///
/// With `capture`, the gradients of those tensors are returned and no `.grad` changes;
/// without, leaf gradients are added to `.grad`.
pub(crate) fn run(
    roots: &[(Tensor, Tensor)],
    retain_graph: bool,
    capture: Option<&[Tensor]>,
) -> Result<Outcome> {
    let _no_grad = no_grad();
    let wanted: FxHashMap<usize, usize> = capture
        .unwrap_or(&[])
        .iter()
        .enumerate()
        .map(|(i, t)| (key(t), i))
        .collect();
    let mut captured = Sums::default();
    let mut leaves = Sums::default();
    let mut retained = Sums::default();

    // Discover the graph and count, per node, the edges that consume it.
    let mut nodes: FxHashMap<usize, Node> = FxHashMap::default();
    let mut consumers: FxHashMap<usize, usize> = FxHashMap::default();
    let mut stack: Vec<Node> = Vec::new();
    for (root, _) in roots {
        if let Some((node, _)) = root.grad_fn_output() {
            if let std::collections::hash_map::Entry::Vacant(entry) = nodes.entry(node.id()) {
                entry.insert(node.clone());
                stack.push(node);
            }
        }
    }
    while let Some(node) = stack.pop() {
        if node.is_released() {
            return Err(Error::Runtime(format!(
                "the graph through '{}' was freed by an earlier backward pass; pass retain_graph=true to backward through it again",
                node.name()
            )));
        }
        for input in node.inputs() {
            if let Some((producer, _)) = input.grad_fn_output() {
                *consumers.entry(producer.id()).or_insert(0) += 1;
                if let std::collections::hash_map::Entry::Vacant(entry) = nodes.entry(producer.id())
                {
                    entry.insert(producer.clone());
                    stack.push(producer);
                }
            }
        }
    }

    // Seed the cotangents, then run the nodes; on failure every gradient the pass holds is
    // given back (nothing is published).
    let mut pending: FxHashMap<(usize, usize), Tensor> = FxHashMap::default();
    let mut propagate = || -> Result<()> {
        for (root, cotangent) in roots {
            route(
                root,
                cotangent.clone(),
                &wanted,
                &mut captured,
                &mut leaves,
                &mut retained,
                &mut pending,
                capture.is_some(),
            )?;
        }

        // Kahn's order: a node runs once every consumer has run.
        let mut ready: VecDeque<Node> = nodes
            .values()
            .filter(|n| consumers.get(&n.id()).copied().unwrap_or(0) == 0)
            .cloned()
            .collect();
        while let Some(node) = ready.pop_front() {
            let grad_outputs: Vec<Option<Tensor>> = (0..node.outputs())
                .map(|i| pending.remove(&(node.id(), i)))
                .collect();
            let inputs = node.inputs();
            let grads = if grad_outputs.iter().any(Option::is_some) {
                node.backward(&grad_outputs)?
            } else {
                vec![None; inputs.len()]
            };
            for (input, grad) in inputs.iter().zip(grads) {
                if let Some(grad) = grad {
                    route(
                        input,
                        grad,
                        &wanted,
                        &mut captured,
                        &mut leaves,
                        &mut retained,
                        &mut pending,
                        capture.is_some(),
                    )?;
                }
                if let Some((producer, _)) = input.grad_fn_output() {
                    if let Some(count) = consumers.get_mut(&producer.id()) {
                        *count -= 1;
                        if *count == 0 {
                            ready.push_back(producer);
                        }
                    }
                }
            }
        }
        Ok(())
    };
    if let Err(error) = propagate() {
        for sums in [&captured, &leaves, &retained] {
            sums.discard_all();
        }
        pending.values().for_each(discard);
        return Err(error);
    }

    // Everything succeeded: materialize, then publish.
    let outcome = match capture {
        Some(inputs) => {
            let mut results: Vec<Option<Tensor>> = vec![None; inputs.len()];
            for (target, grad) in captured.into_ordered() {
                if let Some(&i) = wanted.get(&key(&target)) {
                    results[i] = Some(materialize(&target, &grad)?);
                }
            }
            Outcome::Captured(results)
        }
        None => {
            let mut updates: Vec<(Tensor, Tensor)> = Vec::new();
            for (target, grad) in leaves
                .into_ordered()
                .into_iter()
                .chain(retained.into_ordered())
            {
                match accumulated(&target, &grad) {
                    Ok(total) => updates.push((target, total)),
                    Err(error) => {
                        // Nothing is published: the gradients this pass built for `.grad`
                        // are fresh storage nobody else holds, so they are released now
                        // rather than left to their drop.
                        for (_, total) in updates {
                            let _ = total.carrier().release();
                        }
                        return Err(error);
                    }
                }
            }
            for (target, total) in updates {
                target.autograd().lock().grad = Some(total);
            }
            Outcome::Accumulated
        }
    };
    if !retain_graph {
        nodes.values().for_each(Node::release);
    }
    Ok(outcome)
}

/// The new `.grad` of `target` after this pass's gradient `grad`: materialized, and added to
/// the gradient `target` already has. On failure the storage made for it is released (the
/// existing `.grad` is untouched).
fn accumulated(target: &Tensor, grad: &Tensor) -> Result<Tensor> {
    let fresh = materialize(target, grad)?;
    let Some(existing) = target.grad() else {
        return Ok(fresh);
    };
    let total = add_gradients(&existing, &fresh).and_then(|sum| {
        let total = materialize(target, &sum);
        // The sum is fresh storage of this pass; kept as the total, or released.
        if !matches!(&total, Ok(kept) if kept.carrier().same_as(sum.carrier())) {
            let _ = sum.carrier().release();
        }
        total
    });
    if total.is_err() {
        // Another target of this pass may share `fresh` (a gradient passed on unchanged),
        // so it is released only when the pass fails and nothing is published.
        let _ = fresh.carrier().release();
    }
    total
}

/// Sends a gradient to the tensor object it belongs to: captured if requested, retained on
/// a non-leaf that keeps its gradient, on to the producing node, or summed for a leaf.
#[allow(clippy::too_many_arguments)]
fn route(
    target: &Tensor,
    grad: Tensor,
    wanted: &FxHashMap<usize, usize>,
    captured: &mut Sums,
    leaves: &mut Sums,
    retained: &mut Sums,
    pending: &mut FxHashMap<(usize, usize), Tensor>,
    capturing: bool,
) -> Result<()> {
    if wanted.contains_key(&key(target)) {
        captured.add(target, grad.clone())?;
    }
    let (producer, requires, retain) = {
        let state = target.autograd().lock();
        (
            state.grad_fn.clone(),
            state.requires_grad,
            state.retain_grad,
        )
    };
    match producer {
        Some((node, output)) => {
            if retain && !capturing {
                retained.add(target, grad.clone())?;
            }
            let slot = (node.id(), output);
            let summed = match pending.remove(&slot) {
                Some(sum) => match add_gradients(&sum, &grad) {
                    Ok(total) => total,
                    Err(error) => {
                        discard(&sum);
                        discard(&grad);
                        return Err(error);
                    }
                },
                None => grad,
            };
            pending.insert(slot, summed);
        }
        None if requires && !capturing => leaves.add(target, grad)?,
        None => {}
    }
    Ok(())
}
