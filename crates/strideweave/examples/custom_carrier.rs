//! A custom, definition-backed "Device" carrier built entirely through the public
//! carrier-extension API (defined in `device_carrier/mod.rs`): storage over provider-owned
//! `Vec<f32>` slots, a kernel provider whose general `neg` completes asynchronously on a
//! worker thread, a kernel pack with an optimized `neg` that declines misaligned sizes, a
//! transfer route to the CPU, a typed facet, and a dependent carrier composing a Device
//! carrier.
//!
//! Run with `cargo run --example custom_carrier -p strideweave`.

#[path = "device_carrier/mod.rs"]
mod device_carrier;

use device_carrier::{
    attach_fast_pack, define_device, define_tiles, device_tensor, floats, neg, tiles_tensor,
    Counters, DeviceInfo, Slots,
};
use strideweave::carrier::Carrier;
use strideweave::carriers::Cpu;
use strideweave::movement::move_to;
use strideweave::{DType, Error, Result, Shape, Tensor};

fn main() -> Result<()> {
    // The kernels' counters live as long as the class they count for: the process.
    let counters: &'static Counters = Box::leak(Box::default());

    // 1. Define the Device carrier: storage, the general kernel, a route and a facet.
    let device = define_device(counters)?;

    // 2. Attach a kernel pack before the class is first observed.
    attach_fast_pack(device, counters)?;

    // 3. Capabilities (the first observation seals provider + pack patterns).
    let x = device_tensor(device, &[1.0, -2.0, 3.5, -4.0])?;
    let capabilities: Vec<String> = x
        .carrier()
        .capabilities()
        .iter()
        .map(ToString::to_string)
        .collect();
    println!("Device capabilities: {capabilities:?}");

    // 4. A 4-element neg takes the preferred, optimized kernel.
    let negated = neg(&x)?;
    println!(
        "neg of 4 elements: {:?} (fast ran {}, general ran {})",
        floats(&negated)?,
        Counters::get(&counters.fast_ran),
        Counters::get(&counters.general_ran),
    );

    // 5. A 3-element neg: the fast kernel declines and the asynchronous general one runs.
    let y = device_tensor(device, &[5.0, -6.0, 7.0])?;
    let negated = neg(&y)?;
    println!(
        "neg of 3 elements: {:?} (fast prepared {}, declined {} as misaligned; general ran {})",
        floats(&negated)?,
        Counters::get(&counters.fast_prepared),
        Counters::get(&counters.fast_declined),
        Counters::get(&counters.general_ran),
    );

    // 6. Move Device -> CPU through the Device's transfer route. A definition may only
    // register routes that start at its own class, and the CPU (definition-free) cannot
    // register a move operation to a definition-backed class, so CPU -> Device has no route:
    // the move is refused (docs/extension-design.md, "CPU -> custom moves") and the values
    // are copied back slot by slot instead.
    let on_cpu = move_to(&negated, &Cpu::carrier(3, DType::FLOAT32, true, false)?)?;
    println!(
        "moved to {}: {:?}",
        on_cpu.carrier().class().name(),
        floats(&on_cpu)?
    );
    let target = Carrier::create(device, Slots::default(), 3, DType::FLOAT32, true)?;
    match move_to(&on_cpu, &target) {
        Ok(_) => return Err(Error::Runtime("CPU -> Device unexpectedly moved".into())),
        Err(error) => println!("move CPU -> Device refused ({:?}): {error}", error.kind()),
    }
    for (i, value) in on_cpu.to_values()?.into_iter().enumerate() {
        target.set(i, value)?;
    }
    let back = Tensor::compact(target, Shape::new(3)?)?;
    println!(
        "copied back to {}: {:?}",
        back.carrier().class().name(),
        floats(&back)?
    );

    // 7. The typed facet.
    let info = back
        .carrier()
        .facet::<DeviceInfo>()
        .ok_or_else(|| Error::Runtime("DeviceInfo facet missing".into()))?;
    println!("facet DeviceInfo: name = {}", info.name);

    // 8. A dependent carrier composing a Device carrier forwards neg to it.
    let tiles = define_tiles()?;
    let z = tiles_tensor(tiles, device, &[0.5, 1.5, -2.5, 3.0])?;
    let result = neg(&z)?;
    println!(
        "DeviceTiles neg via {}: {:?} (fast ran {})",
        result.carrier().class().name(),
        floats(&result)?,
        Counters::get(&counters.fast_ran),
    );
    Ok(())
}
