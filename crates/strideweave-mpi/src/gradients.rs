//! [`average_gradients`]: data-parallel training's gradient exchange.

use strideweave::carriers::extension::read_f32s;
use strideweave::carriers::Cpu;
use strideweave::{DType, Error, Layout, Result, Tensor, Value};

use crate::communicator::Communicator;
use crate::protocol::{Collective, Kind};
use crate::runtime;

/// Averages the gradients of `parameters` across every rank of `comm`, as data-parallel
/// training does after each backward pass: afterwards each parameter's `.grad` on every rank
/// is the mean over the ranks of that parameter's gradients, in fresh storage of the
/// gradient's own carrier class. Parameters without a gradient are skipped.
///
/// All gradients travel in one collective (one header exchange and one reduction of their
/// concatenation). Every rank must pass the same parameters in the same order: ranks whose
/// parameter lists differ in count, shape or dtype, or where a parameter has a gradient on
/// some ranks only, each get a Value error naming the parameter and what differed. Faults end
/// as for every collective (docs/distributed.md, Faults).
///
/// # Errors
/// As above; a gradient that cannot be read on one rank fails there with its own error and on
/// the others with a Runtime error naming that rank; the errors of building the new
/// gradients (nothing is assigned unless every gradient was built).
pub fn average_gradients(parameters: &[Tensor], comm: &Communicator) -> Result<()> {
    let gradients: Vec<Option<Tensor>> = parameters.iter().map(Tensor::grad).collect();
    let mut description = format!("parameters: {}", parameters.len());
    for (i, (parameter, gradient)) in parameters.iter().zip(&gradients).enumerate() {
        description.push_str(&format!(
            "\nparameter {i}: shape {}, {}, {}",
            parameter.shape(),
            parameter.dtype(),
            if gradient.is_some() {
                "has a gradient"
            } else {
                "no gradient"
            }
        ));
    }
    let concatenated: Result<Vec<f32>> = gradients
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.as_ref().map(|g| (i, g)))
        .try_fold(Vec::new(), |mut all, (i, g)| {
            all.extend(elements(g).map_err(|e| {
                Error::Runtime(format!("cannot read the gradient of parameter {i}: {e}"))
            })?);
            Ok(all)
        });
    let mut runtime = runtime::lock();
    let mut collective =
        Collective::start(&mut runtime, comm, Kind::AverageGradients, &description)?;
    let send = match concatenated {
        Ok(send) => {
            collective.agree(None)?;
            send
        }
        Err(error) => {
            collective.agree(Some(error))?;
            return Err(Error::Runtime(
                "average_gradients: a local failure was not reported".into(),
            ));
        }
    };
    let mut summed = collective.sum_f32(&send, vec![0.0; send.len()])?;
    drop(runtime);
    let ranks = comm.size() as f32;
    summed.iter_mut().for_each(|v| *v /= ranks);
    let mut averaged = Vec::with_capacity(parameters.len());
    let mut start = 0;
    for (i, g) in gradients.iter().enumerate() {
        let Some(g) = g else {
            averaged.push(None);
            continue;
        };
        let values = &summed[start..start + g.size()];
        start += g.size();
        let fresh = fresh_like(g, values).map_err(|e| {
            Error::Runtime(format!(
                "cannot store the averaged gradient of parameter {i}: {e}"
            ))
        })?;
        averaged.push(Some(fresh));
    }
    for (parameter, gradient) in parameters.iter().zip(averaged) {
        if gradient.is_some() {
            parameter.set_grad(gradient)?;
        }
    }
    Ok(())
}

/// The elements of a Float32 tensor in colexicographic order (one bulk read for a compact
/// CPU tensor).
fn elements(tensor: &Tensor) -> Result<Vec<f32>> {
    if tensor.dtype() != DType::FLOAT32 {
        return Err(Error::Type(format!(
            "gradients are Float32, got {}",
            tensor.dtype()
        )));
    }
    if tensor.carrier().downcast_ref::<Cpu>().is_some()
        && *tensor.layout() == Layout::column_major(tensor.shape().clone())
    {
        return read_f32s(tensor.carrier(), tensor.offset(), tensor.size());
    }
    tensor.to_f32_vec()
}

/// A compact tensor of `like`'s shape holding `values`, on a fresh carrier of `like`'s class.
fn fresh_like(like: &Tensor, values: &[f32]) -> Result<Tensor> {
    let carrier = if like.carrier().downcast_ref::<Cpu>().is_some() {
        Cpu::from_f32(values, true)?
    } else {
        let values: Vec<Value> = values.iter().map(|v| Value::Float(f64::from(*v))).collect();
        like.carrier()
            .new_like(&values, true, Some(DType::FLOAT32))?
    };
    Tensor::compact(carrier, like.shape().clone())
}
