//! `CarrierDefinition`: the immutable description of one definition-backed carrier class.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use crate::carrier::CarrierClass;
use crate::error::{Error, Result};
use crate::extension::{
    CarrierFacet, CompositeProvider, KernelProvider, StorageProvider, TransferRoute,
};

/// One carrier implementation: its storage provider, optional kernel provider (independent
/// classes) or composite provider (dependent classes), directional transfer routes and
/// carrier-specific facets.
///
/// Seed rule: "CarrierDefinition(storage, ..., facets=()) SHALL describe one carrier
/// implementation ... two facets of the same exact facet class SHALL fail with ValueError".
/// Fields are private with getters only; the facets are materialized once into an immutable
/// slice. Cloning shares the definition: one reference count, since a definition is cloned
/// out of the registry on every construction of its class.
#[derive(Clone)]
pub struct CarrierDefinition {
    parts: Arc<Parts>,
}

/// The fields of a [`CarrierDefinition`], shared by its clones.
#[derive(Clone)]
struct Parts {
    storage: StorageProvider,
    kernels: Option<KernelProvider>,
    composite: Option<CompositeProvider>,
    facets: Arc<[Arc<dyn CarrierFacet>]>,
    transfers: Arc<[TransferRoute]>,
}

fn facet_type(facet: &Arc<dyn CarrierFacet>) -> TypeId {
    let any: &dyn Any = &**facet;
    any.type_id()
}

impl CarrierDefinition {
    /// A storage-only definition with no facets.
    pub fn new(storage: StorageProvider) -> CarrierDefinition {
        CarrierDefinition {
            parts: Arc::new(Parts {
                storage,
                kernels: None,
                composite: None,
                facets: Arc::from([]),
                transfers: Arc::from([]),
            }),
        }
    }

    /// This definition with its fields changed by `change` (the builders' common step).
    fn with(self, change: impl FnOnce(&mut Parts)) -> CarrierDefinition {
        let mut parts = Arc::unwrap_or_clone(self.parts);
        change(&mut parts);
        CarrierDefinition {
            parts: Arc::new(parts),
        }
    }

    /// This definition with `provider` as its kernel provider: the class executes the
    /// provider's patterns (and the packs registered before its first observation).
    ///
    /// Seed rule: an independent definition "MAY supply a KernelProvider" — one; a Type
    /// error when this definition already has one. A dependent class's definition is
    /// refused at registration.
    pub fn with_kernels(self, provider: KernelProvider) -> Result<CarrierDefinition> {
        if self.parts.kernels.is_some() {
            return Err(Error::Type(
                "a carrier definition takes at most one KernelProvider".to_string(),
            ));
        }
        Ok(self.with(|parts| parts.kernels = Some(provider)))
    }

    /// This definition with `provider` as its composite provider: the dependent class derives
    /// its per-instance capabilities and prepares its work through the instance's
    /// dependencies.
    ///
    /// Seed rule: a dependent definition "SHALL supply a CompositeProvider" — one; a Type
    /// error when this definition already has one. An independent class's definition with a
    /// composite provider (or a dependent one with a kernel provider) is refused at
    /// registration.
    pub fn with_composite(self, provider: CompositeProvider) -> Result<CarrierDefinition> {
        if self.parts.composite.is_some() {
            return Err(Error::Type(
                "a carrier definition takes at most one CompositeProvider".to_string(),
            ));
        }
        Ok(self.with(|parts| parts.composite = Some(provider)))
    }

    /// This definition with `facets` added (materialized once, in order).
    ///
    /// A Value error naming the facet type when two facets (added here or before) have the
    /// same exact type; no definition is returned then.
    pub fn with_facets(
        self,
        facets: impl IntoIterator<Item = Arc<dyn CarrierFacet>>,
    ) -> Result<CarrierDefinition> {
        let mut all: Vec<Arc<dyn CarrierFacet>> = self.parts.facets.iter().cloned().collect();
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
        Ok(self.with(|parts| parts.facets = all.into()))
    }

    /// This definition with the transfer `routes` added (materialized once, in order).
    ///
    /// A Value error naming the pair when two routes (added here or before) have the same
    /// exact (source class, destination class) pair; no definition is returned then. Every
    /// route's source class must be exactly the class the definition is registered for, which
    /// [`register_carrier_definition`](crate::register_carrier_definition) checks (Type).
    pub fn with_transfers(
        self,
        routes: impl IntoIterator<Item = TransferRoute>,
    ) -> Result<CarrierDefinition> {
        let mut all: Vec<TransferRoute> = self.parts.transfers.iter().cloned().collect();
        for route in routes {
            let pair = (route.source_class(), route.destination_class());
            if let Some(existing) = all
                .iter()
                .find(|r| (r.source_class(), r.destination_class()) == pair)
            {
                return Err(Error::Value(format!(
                    "duplicate transfer route from {} to {}: {} and {}",
                    pair.0,
                    pair.1,
                    existing.route_id(),
                    route.route_id()
                )));
            }
            all.push(route);
        }
        Ok(self.with(|parts| parts.transfers = all.into()))
    }

    /// The transfer routes, in the order they were added.
    pub fn transfers(&self) -> &[TransferRoute] {
        &self.parts.transfers
    }

    /// The route to exactly `destination`, if the definition has one.
    pub fn transfer_route(&self, destination: CarrierClass) -> Option<&TransferRoute> {
        self.parts
            .transfers
            .iter()
            .find(|route| route.destination_class() == destination)
    }

    /// The storage provider.
    pub fn storage(&self) -> &StorageProvider {
        &self.parts.storage
    }

    /// The kernel provider, or `None` for a storage-only definition.
    pub fn kernels(&self) -> Option<&KernelProvider> {
        self.parts.kernels.as_ref()
    }

    /// The composite provider, or `None` for an independent definition.
    pub fn composite(&self) -> Option<&CompositeProvider> {
        self.parts.composite.as_ref()
    }

    /// The facets, in registration order.
    pub fn facets(&self) -> &[Arc<dyn CarrierFacet>] {
        &self.parts.facets
    }
}

impl fmt::Debug for CarrierDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CarrierDefinition")
            .field("storage", &self.parts.storage)
            .field("kernels", &self.parts.kernels)
            .field("composite", &self.parts.composite)
            .field(
                "facets",
                &self
                    .parts
                    .facets
                    .iter()
                    .map(|x| x.facet_name())
                    .collect::<Vec<_>>(),
            )
            .field("transfers", &self.parts.transfers)
            .finish()
    }
}
