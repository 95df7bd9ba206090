//! Runs `examples/custom_carrier.rs` and checks what each of its steps prints.

use std::process::Command;

#[test]
fn the_custom_carrier_example_runs_every_step() {
    let output = Command::new(env!("CARGO"))
        .args([
            "run",
            "-q",
            "--example",
            "custom_carrier",
            "-p",
            "strideweave",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the example failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    for expected in [
        "Device capabilities: [\"neg with operands (tensor Float32->Float32), binary32 compute, \
         no accumulation, Float32 output\"]",
        "neg of 4 elements: [-1.0, 2.0, -3.5, 4.0] (fast ran 1, general ran 0)",
        "neg of 3 elements: [-5.0, 6.0, -7.0] (fast prepared 2, declined 1 as misaligned; \
         general ran 1)",
        "moved to CPU: [-5.0, 6.0, -7.0]",
        "copied back to Device: [-5.0, 6.0, -7.0]",
        "facet DeviceInfo: name = demo-device-0",
        "DeviceTiles neg via Device: [-0.5, -1.5, 2.5, -3.0] (fast ran 2)",
    ] {
        assert!(
            lines.contains(&expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(
        lines.iter().any(
            |l| l.starts_with("move CPU -> Device refused (NotImplemented): ")
                && l.contains("no move route from CPU to Device")
        ),
        "missing the refused CPU -> Device move in:\n{stdout}"
    );
}
