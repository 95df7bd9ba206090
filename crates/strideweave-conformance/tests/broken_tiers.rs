//! The suite's own tests of its TiledEvictable projections: a TiledEvictable over correct
//! tiers keeps the scatter promise on grids of one, two and three axes, and one over tiers
//! whose factories are broken in one way breaks it with the message naming the projection or
//! the scatter that went wrong. (What only the TiledEvictable itself could get wrong — the
//! compact's shape and order, a fresh result at version 1, invalid unselected tiles — is
//! checked by the verifiers' unit tests in `src/tiled.rs`.)

use std::sync::Arc;

use parking_lot::RwLock;
use strideweave::carrier::DefinitionFreeCarrier;
use strideweave::carriers::TiledEvictable;
use strideweave::{Carrier, DType, Error, Result, Tensor, Value};
use strideweave_conformance::{check, Factory, Promise, Verdict};

/// How a [`Tier`]'s factories are broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TierFlaw {
    /// None: correct factories.
    None,
    /// `new_like` ignores the values it is given and holds zeros.
    NewLikeZeros,
    /// `new_like` writes its values into the prototype's own storage and returns a view of it.
    NewLikeShares,
    /// `new_like` keeps the prototype's number of slots, truncating or zero-padding the values.
    NewLikeSizedLikePrototype,
    /// `allocate_like` reuses the prototype's storage, resized and zeroed.
    AllocateShares,
}

/// A definition-free tier of Float32 values whose factories are broken by its [`TierFlaw`].
struct Tier {
    store: Arc<RwLock<Vec<Value>>>,
    /// The slots this handle sees when it is a view of a prototype's storage.
    window: Option<usize>,
    flaw: TierFlaw,
}

impl Tier {
    fn holding(values: Vec<Value>, flaw: TierFlaw) -> Tier {
        Tier {
            store: Arc::new(RwLock::new(values)),
            window: None,
            flaw,
        }
    }

    fn carrier(values: &[Value], flaw: TierFlaw) -> Result<Carrier> {
        Carrier::new(Tier::holding(values.to_vec(), flaw), DType::FLOAT32, true)
    }
}

impl DefinitionFreeCarrier for Tier {
    const NAME: &'static str = "Tier";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }

    fn size(&self) -> usize {
        self.window.unwrap_or_else(|| self.store.read().len())
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        self.store
            .read()
            .get(index)
            .copied()
            .ok_or_else(|| Error::Index(format!("the Tier has no slot {index}")))
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        match self.store.write().get_mut(index) {
            Some(slot) => {
                *slot = value;
                Ok(())
            }
            None => Err(Error::Index(format!("the Tier has no slot {index}"))),
        }
    }

    fn release(&self) -> Result<()> {
        if self.window.is_none() {
            self.store.write().clear();
        }
        Ok(())
    }

    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        let zero = Value::Float(0.0);
        Ok(match self.flaw {
            TierFlaw::NewLikeZeros => Tier::holding(vec![zero; values.len()], self.flaw),
            TierFlaw::NewLikeShares => {
                let mut store = self.store.write();
                if store.len() < values.len() {
                    store.resize(values.len(), zero);
                }
                store[..values.len()].copy_from_slice(values);
                Tier {
                    store: Arc::clone(&self.store),
                    window: Some(values.len()),
                    flaw: self.flaw,
                }
            }
            TierFlaw::NewLikeSizedLikePrototype => {
                let mut kept = values.to_vec();
                kept.resize(self.size(), zero);
                Tier::holding(kept, self.flaw)
            }
            _ => Tier::holding(values.to_vec(), self.flaw),
        })
    }

    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        let zeros = vec![Value::Float(0.0); size];
        if self.flaw == TierFlaw::AllocateShares {
            *self.store.write() = zeros;
            return Ok(Tier {
                store: Arc::clone(&self.store),
                window: None,
                flaw: self.flaw,
            });
        }
        Ok(Tier::holding(zeros, self.flaw))
    }
}

/// A TiledEvictable over a full primary and an empty secondary Tier with `flaw`.
fn tiled(flaw: TierFlaw, values: &[Value], grid: &[usize], tile: &[usize]) -> Result<Carrier> {
    let primary = Tier::carrier(values, flaw)?;
    let secondary = Tier::carrier(&[], flaw)?;
    TiledEvictable::carrier(&primary, &secondary, grid, tile, None)
}

/// The class under test: TiledEvictables over Tiers with `flaw`, with operands covering
/// their carrier (single-slot tiles) and the tiling hook.
fn tiered(flaw: TierFlaw) -> Factory {
    Factory::new(
        format!("TiledEvictable(Tier, Tier) ({flaw:?})"),
        move |_, values| tiled(flaw, values, &[values.len()], &[1]),
    )
    .with_tensors(move |_, slots, offset, layout| {
        let elements = (0..layout.size())
            .map(|i| Ok(slots[offset + layout.index_of(i)?]))
            .collect::<Result<Vec<Value>>>()?;
        let shape = layout.shape().clone();
        let single = vec![1; shape.leaves().len()];
        Tensor::compact(tiled(flaw, &elements, shape.leaves(), &single)?, shape)
    })
    .with_tiling(move |_, values, grid, tile| tiled(flaw, values, grid, tile))
    .with_min_slots(1)
    .with_fixed_extent_factories()
}

/// The broken scatter promise's message for `flaw`.
fn broken(flaw: TierFlaw) -> String {
    match check(&tiered(flaw), Promise::Scatter).verdict {
        Verdict::Broken(broken) => broken.to_string(),
        other => panic!("the scatter promise should have broken for {flaw:?}, got {other:?}"),
    }
}

#[test]
fn correct_tiers_keep_the_projections_on_grids_of_one_two_and_three_axes() {
    let outcome = check(&tiered(TierFlaw::None), Promise::Scatter);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert_eq!(
        outcome.notes.last().unwrap(),
        "project and scatter (replace and add) through the tiling hook on grids [3] of [2] \
         tiles, [2, 3] of [2, 1] tiles, [3, 2] of [1, 3] tiles, [2, 2, 2] of [1, 2, 1] tiles"
    );
}

#[test]
fn a_tier_whose_new_like_drops_its_values_breaks_the_projected_values() {
    let message = broken(TierFlaw::NewLikeZeros);
    assert!(
        message.starts_with(
            "broken promise 'scatter writes exactly its slots': TiledEvictable(Tier, Tier) \
             (NewLikeZeros): project of tiles [[2, 0]] (grid [3], tile [2]): compact element \
             [0] is 0.0, but it stands for the tensor's element [4], which is"
        ),
        "{message}"
    );
    assert!(
        message.contains("how to read this: a scatter wrote other slots or values"),
        "{message}"
    );
}

#[test]
fn a_tier_whose_new_like_shares_the_prototypes_storage_breaks_the_unchanged_source() {
    let message = broken(TierFlaw::NewLikeShares);
    assert!(
        message.starts_with(
            "broken promise 'scatter writes exactly its slots': TiledEvictable(Tier, Tier) \
             (NewLikeShares): project of tiles [[2, 0]] (grid [3], tile [2]) changed the \
             carrier: slot 0 changed"
        ),
        "{message}"
    );
}

#[test]
fn a_tier_whose_new_like_keeps_the_prototypes_size_breaks_the_scattered_values() {
    let message = broken(TierFlaw::NewLikeSizedLikePrototype);
    assert!(
        message.starts_with(
            "broken promise 'scatter writes exactly its slots': TiledEvictable(Tier, Tier) \
             (NewLikeSizedLikePrototype): project of tiles [[2, 0]] (grid [3], tile [2]) \
             failed: provider contract violated: Tier.new_like was asked for 4 slots but made \
             a carrier of 6"
        ),
        "{message}"
    );
}

#[test]
fn a_tier_whose_allocate_like_reuses_the_prototypes_storage_breaks_the_unchanged_template() {
    let message = broken(TierFlaw::AllocateShares);
    assert!(
        message.starts_with(
            "broken promise 'scatter writes exactly its slots': TiledEvictable(Tier, Tier) \
             (AllocateShares): reading after TiledEvictable::scatter (replace) into tiles \
             [[2, 0]] (grid [3], tile [2]) failed:"
        ),
        "{message}"
    );
}
