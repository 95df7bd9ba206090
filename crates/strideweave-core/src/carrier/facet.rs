//! `CarrierFacet`: the marker of a carrier-specific, typed control-plane provider.

use std::any::Any;

/// A carrier-specific provider registered by a `CarrierDefinition` and found by its exact
/// Rust type ([`Carrier::facet`](crate::Carrier::facet),
/// [`Carrier::require_facet`](crate::Carrier::require_facet)).
///
/// Seed rule: "CarrierFacet SHALL be an open marker base class for immutable carrier-specific
/// providers." Any `Send + Sync + 'static` type may implement it (an empty `impl`). A facet only
/// adds its own surface: it never widens storage dtype support, capabilities, movement routes
/// or operation meaning. "Another facet_type SHALL fail with TypeError" is enforced by the type
/// system (`F: CarrierFacet`).
///
/// ```
/// use strideweave::carriers::extension::CarrierFacet;
/// struct Residency { tiles: usize }
/// impl CarrierFacet for Residency {}
/// let facet = Residency { tiles: 4 };
/// assert!(facet.facet_name().ends_with("Residency"));
/// ```
pub trait CarrierFacet: Any + Send + Sync {
    /// The exact facet type's name, used in messages.
    fn facet_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}
