//! Typed facets: every facet the factory declares ([`FacetProbe`]) is found by its exact type
//! on every carrier of the class — fresh, written, factory-made, released — and names itself
//! by that type; a facet type the class does not register answers none, and `require_facet`
//! refuses it with NotImplemented naming the type (seed: "CarrierFacet SHALL be an open marker
//! base class for immutable carrier-specific providers").

use std::fmt;

use strideweave::carriers::extension::CarrierFacet;
use strideweave::{Carrier, ErrorKind, Result};

use crate::operations::prototype;
use crate::support::{Check, Context};

/// A facet type the factory declares its class registers, as the suite looks it up: built
/// by [`FacetProbe::of`] and handed to
/// [`Factory::with_facet`](crate::Factory::with_facet).
///
/// ```
/// use strideweave::carriers::extension::CarrierFacet;
/// use strideweave_conformance::FacetProbe;
///
/// struct Residency;
/// impl CarrierFacet for Residency {}
/// let probe = FacetProbe::of::<Residency>();
/// assert!(probe.type_name().ends_with("Residency"));
/// ```
#[derive(Clone, Copy)]
pub struct FacetProbe {
    type_name: &'static str,
    find: fn(&Carrier) -> Option<&'static str>,
    require: fn(&Carrier) -> Result<&'static str>,
}

impl fmt::Debug for FacetProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FacetProbe")
            .field("type_name", &self.type_name)
            .finish_non_exhaustive()
    }
}

fn find<F: CarrierFacet>(carrier: &Carrier) -> Option<&'static str> {
    carrier.facet::<F>().map(CarrierFacet::facet_name)
}

fn require<F: CarrierFacet>(carrier: &Carrier) -> Result<&'static str> {
    carrier.require_facet::<F>().map(CarrierFacet::facet_name)
}

impl FacetProbe {
    /// The probe of the facet type `F`.
    pub fn of<F: CarrierFacet>() -> FacetProbe {
        FacetProbe {
            type_name: std::any::type_name::<F>(),
            find: find::<F>,
            require: require::<F>,
        }
    }

    /// The facet type's name.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }
}

/// A facet type no carrier registers: the suite's own, so no class can have it.
struct NoCarrierRegistersThis;

impl CarrierFacet for NoCarrierRegistersThis {}

pub(crate) fn facets(cx: &mut Context<'_>) -> Check {
    let declared = cx.factory.facets();
    let carrier = prototype(cx)?;
    let dtype = carrier.dtype();
    let value = cx.rng.value(dtype);
    let mut states: Vec<(&str, Carrier)> = vec![("fresh", carrier.clone())];
    cx.ok(carrier.set(0, value), || "a write".into())?;
    states.push(("written", carrier.clone()));
    let size = carrier.size();
    let values = cx.rng.values(dtype, size);
    states.push((
        "new_like",
        cx.ok(carrier.new_like(&values, true, None), || {
            "new_like of the prototype".into()
        })?,
    ));
    states.push((
        "allocate_like",
        cx.ok(carrier.allocate_like(size, true, None, false), || {
            "allocate_like of the prototype".into()
        })?,
    ));
    let released = cx.ok(carrier.new_like(&values, true, None), || {
        "new_like of the prototype".into()
    })?;
    cx.ok(released.release(), || "release".into())?;
    states.push(("released", released));

    for (state, c) in &states {
        for probe in &declared {
            let what = format!("facet::<{}>() on a {state} carrier", probe.type_name);
            let found = (probe.find)(c).ok_or_else(|| {
                cx.broken(format!(
                    "the factory declares the facet {} but {what} is none; the class's \
                     definition must register a facet of exactly that type \
                     (CarrierDefinition::with_facets)",
                    probe.type_name
                ))
            })?;
            cx.ensure(found == probe.type_name, || {
                format!(
                    "facet_name() of the {} facet found by {what} is '{found}', not its type \
                     name",
                    probe.type_name
                )
            })?;
            cx.ok((probe.require)(c), || {
                format!(
                    "require_facet::<{}>() on a {state} carrier",
                    probe.type_name
                )
            })?;
        }
        cx.ensure(c.facet::<NoCarrierRegistersThis>().is_none(), || {
            format!(
                "facet::<{}>() on a {state} carrier found a facet of a type no carrier \
                 registers",
                std::any::type_name::<NoCarrierRegistersThis>()
            )
        })?;
        let refused = cx.expect_error(
            c.require_facet::<NoCarrierRegistersThis>().map(|_| ()),
            ErrorKind::NotImplemented,
            || format!("require_facet of an unregistered facet type on a {state} carrier"),
        )?;
        let message = refused.to_string();
        cx.ensure(message.contains("NoCarrierRegistersThis"), || {
            format!(
                "require_facet of an unregistered facet type on a {state} carrier failed with \
                 '{message}', which does not name the type"
            )
        })?;
    }
    cx.notes.push(format!(
        "{} declared facets found by exact type in {} states; an unregistered facet type \
         answered none",
        declared.len(),
        states.len()
    ));
    Ok(())
}
