//! Kernel packs: on a fresh class of the kind under test (one nothing has constructed or
//! queried, [`Factory::with_fresh_class`](crate::Factory::with_fresh_class)) the suite
//! registers packs of its own for a probe operation — one declining at a higher preference,
//! two accepting at equal preference, and one for a second fresh class — and checks that calls pick
//! the first accepting kernel in `(namespace, version)` order every time, that the declining
//! one passes to the next, that the other class's pack is never used, and that a pack
//! registered once the class is observed is refused (seed: "Kernel patterns are
//! authoritative and deterministically selected").

use std::sync::atomic::{AtomicUsize, Ordering};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    carrier_definition, InterfaceHandle, Preparation, PreparedKernel, ProviderResult, Submitted,
    Unsupported,
};
use strideweave::operation::{
    call, define_operation, Arithmetic, BoundOperationCall, OperandKind, OperandPlan, OperandSpec,
    OperationCapability, OperationPlan, OperationSchema, ResolvedInvocation, ResultSpec, Vjp,
};
use strideweave::{
    register_kernel_pack, DType, ErrorKind, KernelExecutionInterface, KernelPack, KernelPattern,
    Result, Shape, Tensor, Value,
};

use crate::factory::CarrierFactory;
use crate::operations::prototype;
use crate::support::{Check, Context, Result2};

/// A counter for the names of probe operations, unique within the process.
static PROBES: AtomicUsize = AtomicUsize::new(0);

/// The suite's probe: a fresh unary Float32 operation no carrier advertises.
struct Probe {
    name: String,
    plan: OperationPlan,
}

impl Probe {
    fn define() -> Result<Probe> {
        let name = format!(
            "conformance.pack_probe_{}_{}",
            std::process::id(),
            PROBES.fetch_add(1, Ordering::Relaxed)
        );
        let plan = OperationPlan::new(
            &name,
            [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?],
            Arithmetic::Binary32,
            None,
            None,
            DType::FLOAT32,
        )?;
        let schema =
            OperationSchema::new([OperandSpec::new("x", OperandKind::Tensor, false)?], [])?;
        let resolved = plan.clone();
        let resolve = move |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
            let x = call.tensor(0)?;
            let result = ResultSpec::canonical(DType::FLOAT32, x.shape().clone());
            ResolvedInvocation::new(call.clone(), resolved.clone(), [result], [], None)
        };
        define_operation(&name, schema, resolve, None, Vjp::NonDifferentiable)?;
        Ok(Probe { name, plan })
    }

    /// A pattern computing `x + mark`, with id `id`.
    fn adding(&self, mark: f32, id: &str) -> Result<KernelPattern> {
        KernelPattern::synchronous(
            [OperationCapability::from_plan(self.plan.clone())],
            id,
            move |invocation, _| {
                let x = invocation.call().tensor(0)?.to_f32_vec()?;
                let y: Vec<f32> = x.iter().map(|v| v + mark).collect();
                Ok(vec![invocation.result_from_f32(0, &y)?])
            },
        )
    }

    /// A pattern computing `x + mark` at `preference`, with id `id`.
    fn adding_at(&self, mark: f32, id: &str, preference: i64) -> Result<KernelPattern> {
        KernelPattern::new(
            &strideweave::operation::operation_definition(&self.name)?,
            [OperationCapability::from_plan(self.plan.clone())],
            id,
            move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
                let invocation = invocation.clone();
                Ok(Preparation::Kernel(PreparedKernel::new(
                    interface.clone(),
                    move || {
                        let x = invocation.call().tensor(0)?.to_f32_vec()?;
                        let y: Vec<f32> = x.iter().map(|v| v + mark).collect();
                        ProviderResult::new([invocation.result_from_f32(0, &y)?])
                            .map(Submitted::Ready)
                    },
                )))
            },
            preference,
        )
    }

    /// A pattern at `preference` that declines every call.
    fn declining(&self, id: &str, preference: i64) -> Result<KernelPattern> {
        KernelPattern::new(
            &strideweave::operation::operation_definition(&self.name)?,
            [OperationCapability::from_plan(self.plan.clone())],
            id,
            |_, _| {
                Ok(Preparation::Unsupported(Unsupported::new(
                    "the conformance probe's first pack declines every call on purpose",
                )?))
            },
            preference,
        )
    }
}

/// The execution interface of `class`'s kernel provider, when it has one.
fn interface_of(class: CarrierClass) -> Option<InterfaceHandle> {
    carrier_definition(class).and_then(|d| d.kernels().map(|k| k.interface().clone()))
}

/// Registers a pack adding 100 at a high preference for `decoy`, another fresh class of the
/// kind under test that nothing constructs: a pack that must never run for the class the
/// suite calls on.
fn decoy(probe: &Probe, decoy: CarrierClass) -> Result<()> {
    let interface = interface_of(decoy).ok_or_else(|| {
        strideweave::Error::Type(format!(
            "the second fresh class {decoy} has no kernel provider"
        ))
    })?;
    let pattern = probe.adding_at(100.0, "decoy.add100", 10)?;
    register_kernel_pack(KernelPack::new(
        "conformance.decoy",
        "1",
        decoy,
        interface,
        [pattern],
    )?)
}

pub(crate) fn kernel_packs(cx: &mut Context<'_>) -> Check {
    let probe = cx.ok(Probe::define(), || "defining the probe operation".into())?;
    let observed = prototype(cx)?;
    late_pack_refused(
        cx,
        &probe,
        &observed,
        "the class under test (already observed)",
    )?;
    if let Some(reason) = takes_no_packs(observed.class()) {
        cx.not_applicable = Some(format!(
            "{reason}; a pack for the observed class was refused with nothing changed"
        ));
        return Ok(());
    }
    let Some(fresh) = cx.factory.fresh_class() else {
        cx.not_applicable = Some(format!(
            "{} is definition-backed with a kernel provider, so it takes kernel packs, but only \
             until it is first observed (seed: \"Definition and extension registration seal on \
             first observation\"), and every carrier the factory builds is observed; the \
             factory gives no fresh class to register them on (Factory::defined, or \
             Factory::with_fresh_class); a pack for the observed class was refused with \
             nothing changed",
            observed.class()
        ));
        return Ok(());
    };
    let (class, factory) = cx.ok(fresh, || "the factory's fresh class".into())?;
    if let Some(reason) = takes_no_packs(class) {
        return Err(cx.broken(format!(
            "the factory's fresh class cannot take packs although the class under test can: \
             {reason}"
        )));
    }
    let Some(interface) = interface_of(class) else {
        return Err(cx.broken(format!("the fresh class {class} has no kernel provider")));
    };
    let packs = [
        (
            "conformance.a",
            probe.declining("conformance.a.declines", 1),
        ),
        ("conformance.b", probe.adding(1.0, "conformance.b.add1")),
        ("conformance.c", probe.adding(2.0, "conformance.c.add2")),
    ];
    for (namespace, pattern) in packs {
        let pattern = cx.ok(pattern, || format!("the pattern of {namespace}"))?;
        let pack = cx.ok(
            KernelPack::new(namespace, "1", class, interface.clone(), [pattern]),
            || format!("the kernel pack {namespace}"),
        )?;
        cx.ok(register_kernel_pack(pack), || {
            format!(
                "registering the kernel pack {namespace} for the fresh {class} (the factory's \
                 with_fresh_class must give a class nothing has constructed or queried)"
            )
        })?;
    }
    let other = cx.ok(fresh_again(cx), || "a second fresh class".into())?;
    cx.ok(decoy(&probe, other), || {
        format!("registering a pack for a second fresh class {other}")
    })?;

    let values = [0.5, -1.25, 3.0].map(Value::Float);
    let carrier = cx.ok(factory.carrier(DType::FLOAT32, &values), || {
        format!("a Float32 carrier of the fresh {class}")
    })?;
    cx.ensure(carrier.class() == class, || {
        format!(
            "the fresh class's factory built a {} carrier, not one of the fresh {class}",
            carrier.class()
        )
    })?;
    cx.ensure(carrier.supports_operation_plan(&probe.plan), || {
        format!(
            "the fresh {class} with three packs for {} does not advertise its plan",
            probe.name
        )
    })?;
    let shape = Shape::new(3).map_err(|e| cx.broken(e))?;
    let x = cx.ok(Tensor::compact(carrier.clone(), shape), || {
        "a tensor".into()
    })?;
    for attempt in 1..=3 {
        let what = format!(
            "{}(Float32 3:1@0) on the fresh {class}, call {attempt}",
            probe.name
        );
        let results = cx.ok(call(&probe.name, [x.clone().into()], &[]), || {
            format!(
                "{what} (pack conformance.a declines it: a declining kernel passes to the \
                 next candidate)"
            )
        })?;
        let got = cx.ok(results[0].to_f32_vec(), || format!("reading {what}"))?;
        let marks: Vec<f32> = got
            .iter()
            .zip(&values)
            .map(|(g, v)| g - v.as_f64().unwrap_or(0.0) as f32)
            .collect();
        let ran = match marks.first().copied() {
            Some(m) if marks.iter().all(|&k| k == m) => m,
            _ => f32::NAN,
        };
        cx.ensure(ran == 1.0, || {
            let who = if ran == 2.0 {
                "pack conformance.c ran, though conformance.b precedes it (equal preference: \
                 packs in (namespace, version) order)"
                    .to_string()
            } else if ran == 100.0 {
                "the pack registered for another class (conformance.decoy) ran".to_string()
            } else {
                format!("no pack of the suite computed it (x + {marks:?})")
            };
            format!("{what} gave {got:?}: {who}; conformance.b (x + 1) is due")
        })?;
        cx.ensure(results[0].carrier().class() == class, || {
            format!(
                "{what} published a {} result, not one of the fresh class",
                results[0].carrier().class()
            )
        })?;
    }
    late_pack_refused(cx, &probe, &carrier, "the fresh class once observed")?;
    cx.notes.push(format!(
        "three packs on the fresh {class}: the declining one passed on, the first accepting \
         one in (namespace, version) order ran on 3 calls, another class's pack never ran"
    ));
    Ok(())
}

/// Why `class` takes no kernel packs under the seed's rules, or `None` when it is a
/// definition-backed independent class with a kernel provider (seed: "A kernel pack belongs
/// to one exact independent carrier": its class has "a registered definition and kernel
/// provider").
fn takes_no_packs(class: CarrierClass) -> Option<String> {
    let dependent = format!(
        "{class} is a dependent carrier: it derives execution through its dependencies and \
         never owns kernel packs (seed: \"A DependentCarrier definition SHALL supply a \
         CompositeProvider and SHALL supply no KernelProvider\"; \"A kernel pack belongs to one \
         exact independent carrier\")"
    );
    let Some(definition) = carrier_definition(class) else {
        return Some(if class.is_shipped() {
            format!(
                "{class} is a definition-free shipped class, which public kernel-pack \
                 registration rejects (seed: \"Definition-free carriers retain the existing \
                 extension path\": Generic, CPU, FileBacked, Evictable, BlockDeviceCarrier and \
                 Metal stay definition-free)"
            )
        } else if class.kind() == ClassKind::Dependent {
            dependent
        } else {
            format!(
                "{class} is definition-free: a kernel pack's class must have a registered \
                 definition and kernel provider (seed: \"A kernel pack belongs to one exact \
                 independent carrier\")"
            )
        });
    };
    if class.kind() == ClassKind::Dependent {
        return Some(dependent);
    }
    if definition.kernels().is_none() {
        return Some(format!(
            "{class} is storage-only: its definition has no kernel provider, and a kernel \
             pack's class must have one (seed: \"An independent definition with no kernel \
             provider SHALL be storage-only\"; \"A kernel pack belongs to one exact \
             independent carrier\")"
        ));
    }
    None
}

/// A second fresh class from the factory's hook.
fn fresh_again(cx: &Context<'_>) -> Result<CarrierClass> {
    match cx.factory.fresh_class() {
        Some(fresh) => fresh.map(|(class, _)| class),
        None => Err(strideweave::Error::Runtime(
            "the fresh-class hook answered once and then no more".into(),
        )),
    }
}

/// A pack registered for `carrier`'s class now (observed: constructed) is refused with a
/// Type error and changes no capability.
fn late_pack_refused(
    cx: &Context<'_>,
    probe: &Probe,
    carrier: &Carrier,
    which: &str,
) -> Result2<()> {
    let class = carrier.class();
    let before = carrier.capabilities();
    let advertised = carrier.supports_operation_plan(&probe.plan);
    let interface = match interface_of(class) {
        Some(interface) => interface,
        None => cx.ok(
            KernelExecutionInterface::new("1").and_then(InterfaceHandle::new),
            || "an execution interface".into(),
        )?,
    };
    let pattern = cx.ok(probe.adding(7.0, "conformance.late.add7"), || {
        "a late pattern".into()
    })?;
    let pack = cx.ok(
        KernelPack::new("conformance.late", "1", class, interface, [pattern]),
        || "a late kernel pack".into(),
    )?;
    cx.expect_error(register_kernel_pack(pack), ErrorKind::Type, || {
        format!("registering a kernel pack for {which}, {class}")
    })?;
    cx.ensure(carrier.capabilities() == before, || {
        format!("a refused kernel pack for {which} changed the capabilities of {class}")
    })?;
    cx.ensure(
        carrier.supports_operation_plan(&probe.plan) == advertised,
        || format!("a refused kernel pack for {which} changed whether {class} advertises its plan"),
    )?;
    Ok(())
}
