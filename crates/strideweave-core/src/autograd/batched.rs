//! Batched `grad` (docs/autograd.md, grad and grad_batched): many cotangents
//! stacked along a leading batch mode, differentiated one pass each, the gradients stacked
//! the same way.

use strideweave_layout::Layout;

use crate::autograd::grad;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The gradients of `outputs` with respect to `inputs` for a batch of cotangents, without
/// touching any `.grad`: one entry per input, `None` where an input is unreachable.
///
/// Each cotangent's layout is a leaf batch mode of extent `K` (any stride) prepended to its
/// output's exact layout; every cotangent has the same `K ≥ 1`. Pass `k` differentiates with
/// the `k`-th slice of every cotangent, as [`grad`] would. An input's result stacks its `K`
/// gradients: the batch mode `K` with stride equal to the cosize of one gradient, prepended
/// to that gradient's layout, in fresh storage of the gradient's carrier class. The graph
/// is kept between passes and released after the last one unless `retain_graph`.
///
/// # Errors
/// The errors of [`grad`], checked before the first pass; a Value error for a cotangent count
/// that differs from the outputs, no output at all, a cotangent whose layout is not a leaf
/// batch mode prepended to its output's layout, or batch extents that differ.
///
/// ```
/// use strideweave::autograd::grad_batched;
/// use strideweave::carriers::Cpu;
/// use strideweave::{ops, Shape, Tensor, Value};
/// let x = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
/// x.set_requires_grad(true)?;
/// let y = ops::mul(&x, &x)?;                            // dy/dx = 2x, elementwise
/// // Two cotangents, the rows of the 2×2 identity, batched along a leading mode.
/// let eye = Tensor::new(Cpu::from_f32(&[1.0, 0.0, 0.0, 1.0], true)?, 0, "(2,2):(2,1)".parse()?)?;
/// let jacobian = grad_batched(&[y], &[x], &[eye], false)?.remove(0).unwrap();
/// assert_eq!(jacobian.shape(), &Shape::new((2, 2))?);
/// assert_eq!(
///     jacobian.to_values()?,
///     [2.0, 0.0, 0.0, 4.0].map(Value::Float)
/// );
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn grad_batched(
    outputs: &[Tensor],
    inputs: &[Tensor],
    cotangents: &[Tensor],
    retain_graph: bool,
) -> Result<Vec<Option<Tensor>>> {
    if cotangents.len() != outputs.len() {
        return Err(Error::Value(format!(
            "batched grad needs one cotangent per output: {} outputs, {} cotangents",
            outputs.len(),
            cotangents.len()
        )));
    }
    let mut batch: Option<usize> = None;
    let mut strides = Vec::with_capacity(outputs.len());
    for (i, (output, cotangent)) in outputs.iter().zip(cotangents).enumerate() {
        let (extent, stride) = batch_mode(cotangent.layout(), output.layout(), i)?;
        if batch.is_some_and(|b| b != extent) {
            return Err(Error::Value(format!(
                "every batched cotangent needs one batch extent: cotangent {i} has {extent}, the first has {}",
                batch.unwrap_or(extent)
            )));
        }
        batch = Some(extent);
        strides.push(stride);
    }
    let Some(batch) = batch else {
        return Err(Error::Value(
            "batched grad needs at least one output".into(),
        ));
    };
    let mut passes: Vec<Vec<Option<Tensor>>> = Vec::with_capacity(batch);
    for k in 0..batch {
        let slices = outputs
            .iter()
            .zip(cotangents)
            .zip(&strides)
            .map(|((output, cotangent), stride)| {
                let offset = cotangent.offset() + k * stride;
                Tensor::new(cotangent.carrier().clone(), offset, output.layout().clone()).map(Some)
            })
            .collect::<Result<Vec<_>>>()?;
        let last = k + 1 == batch;
        passes.push(grad(outputs, inputs, &slices, retain_graph || !last)?);
    }
    (0..inputs.len())
        .map(|i| stack(passes.iter().map(|pass| pass.get(i).cloned().flatten())))
        .collect()
}

/// The batch extent and stride of `cotangent` (cotangent `index`), whose layout must be a
/// leaf mode prepended to `output`.
fn batch_mode(cotangent: &Layout, output: &Layout, index: usize) -> Result<(usize, usize)> {
    let modes = cotangent.modes();
    let refuse = || {
        Err(Error::Value(format!(
            "batched cotangent {index} must be a leaf batch mode prepended to the output's layout {output}, got {cotangent}"
        )))
    };
    let Some((first, rest)) = modes.split_first() else {
        return refuse();
    };
    let rest = Layout::from_modes(rest)?;
    match first.leaf_pairs().collect::<Vec<_>>()[..] {
        [(extent, stride)] if first.depth() == 1 && rest == *output && extent >= 1 => {
            Ok((extent, stride))
        }
        _ => refuse(),
    }
}

/// The gradients of one input over the passes, stacked along a leading batch mode; `None`
/// when every pass found the input unreachable.
fn stack(grads: impl Iterator<Item = Option<Tensor>>) -> Result<Option<Tensor>> {
    let grads: Vec<Option<Tensor>> = grads.collect();
    let Some(Some(first)) = grads.first() else {
        return Ok(None);
    };
    let layout = first.layout().clone();
    let span = layout.cosize();
    let mut values = Vec::with_capacity(span * grads.len());
    for grad in &grads {
        let Some(grad) = grad.as_ref().filter(|g| g.layout() == &layout) else {
            return Err(Error::Runtime(
                "a batched grad pass produced a gradient unlike the others".into(),
            ));
        };
        let slots: Vec<usize> = (grad.offset()..grad.offset() + span).collect();
        values.extend(grad.carrier().get_all(&slots)?);
    }
    let batch: Layout = format!("{}:{span}", grads.len()).parse()?;
    let mut modes = vec![batch];
    modes.extend(layout.modes());
    let carrier = first
        .carrier()
        .new_like(&values, true, Some(DType::FLOAT32))?;
    Tensor::new(carrier, 0, Layout::from_modes(&modes)?).map(Some)
}
