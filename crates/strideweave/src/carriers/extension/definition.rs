//! `CarrierDefinition`: the immutable description of one definition-backed carrier class.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use crate::carriers::extension::{CarrierFacet, StorageProvider};
use crate::error::{Error, Result};

/// One carrier implementation: its storage provider and carrier-specific facets (kernels,
/// transfer routes and composites arrive later).
///
/// Seed rule: "CarrierDefinition(storage, ..., facets=()) SHALL describe one carrier
/// implementation ... two facets of the same exact facet class SHALL fail with ValueError".
/// Fields are private with getters only; the facets are materialized once into an immutable
/// slice. Cloning shares the definition.
#[derive(Clone)]
pub struct CarrierDefinition {
    storage: StorageProvider,
    facets: Arc<[Arc<dyn CarrierFacet>]>,
}

fn facet_type(facet: &Arc<dyn CarrierFacet>) -> TypeId {
    let any: &dyn Any = &**facet;
    any.type_id()
}

impl CarrierDefinition {
    /// A storage-only definition with no facets.
    pub fn new(storage: StorageProvider) -> CarrierDefinition {
        CarrierDefinition {
            storage,
            facets: Arc::from([]),
        }
    }

    /// This definition with `facets` added (materialized once, in order).
    ///
    /// A Value error naming the facet type when two facets (added here or before) have the
    /// same exact type; no definition is returned then.
    pub fn with_facets(
        self,
        facets: impl IntoIterator<Item = Arc<dyn CarrierFacet>>,
    ) -> Result<CarrierDefinition> {
        let mut all: Vec<Arc<dyn CarrierFacet>> = self.facets.iter().cloned().collect();
        for facet in facets {
            let exact = facet_type(&facet);
            if all.iter().any(|existing| facet_type(existing) == exact) {
                return Err(Error::Value(format!(
                    "duplicate carrier facet of type {}",
                    facet.facet_name()
                )));
            }
            all.push(facet);
        }
        Ok(CarrierDefinition {
            storage: self.storage,
            facets: all.into(),
        })
    }

    /// The storage provider.
    pub fn storage(&self) -> &StorageProvider {
        &self.storage
    }

    /// The facets, in registration order.
    pub fn facets(&self) -> &[Arc<dyn CarrierFacet>] {
        &self.facets
    }
}

impl fmt::Debug for CarrierDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CarrierDefinition")
            .field("storage", &self.storage)
            .field(
                "facets",
                &self
                    .facets
                    .iter()
                    .map(|x| x.facet_name())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}
