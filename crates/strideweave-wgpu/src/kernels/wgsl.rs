//! WGSL generation: one compute shader per kernel specialization.
//!
//! Every shader runs 256 invocations per workgroup on a 2D grid of workgroups (at most 65535
//! per dimension): invocation `i = (wid.y · groups.x + wid.x) · 256 + lid` handles output
//! element `i` and returns when `i ≥ n`. A uniform `Params` block carries what varies between
//! calls without changing the code: the element counts and the operands' offsets. What
//! changes the code — the operation, the dtype and the way each operand is addressed — is
//! the specialization key.

use std::fmt::Write;

/// Invocations per workgroup.
pub(crate) const WORKGROUP: u32 = 256;

/// The most workgroups per grid dimension (WebGPU's default `maxComputeWorkgroupsPerDimension`).
pub(crate) const MAX_GROUPS: u32 = 65535;

/// The bytes of the uniform `Params` block.
pub(crate) const PARAMS_BYTES: usize = 32;

/// How a shader addresses one operand (or the result) by ordinal: slot = offset + `at(i)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// `at(i) = i · multiplier`, the multiplier a `Params` field (`"1u"` for none): compact
    /// operands, whose addressing does not depend on their extents.
    Scaled(&'static str),
    /// Baked colexicographic leaves `(extent, stride)`: `at(i) = Σ_k ((i / Π_{j<k} e_j) mod
    /// e_k) · s_k`, leaves of extent 1 already dropped.
    Leaves(Vec<(usize, usize)>),
}

impl Access {
    /// The part of a specialization key this access contributes.
    pub(crate) fn key(&self) -> String {
        match self {
            Access::Scaled(multiplier) => format!("x{multiplier}"),
            Access::Leaves(leaves) => leaves
                .iter()
                .map(|(e, s)| format!("{e}:{s}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The WGSL function `name(i: u32) -> u32`.
    fn function(&self, name: &str) -> String {
        let mut body = String::new();
        match self {
            Access::Scaled("1u") => body.push_str("    return i;\n"),
            Access::Scaled(multiplier) => {
                let _ = writeln!(body, "    return i * params.{multiplier};");
            }
            Access::Leaves(leaves) => {
                body.push_str("    var r = i;\n    var o = 0u;\n");
                for (k, (extent, stride)) in leaves.iter().enumerate() {
                    let last = k + 1 == leaves.len();
                    match (last, *stride) {
                        (true, 0) => {}
                        (true, s) => {
                            let _ = writeln!(body, "    o = o + r * {s}u;");
                        }
                        (false, 0) => {
                            let _ = writeln!(body, "    r = r / {extent}u;");
                        }
                        (false, s) => {
                            let _ = writeln!(
                                body,
                                "    o = o + (r % {extent}u) * {s}u;\n    r = r / {extent}u;"
                            );
                        }
                    }
                }
                body.push_str("    return o;\n");
            }
        }
        format!("fn {name}(i: u32) -> u32 {{\n{body}}}\n")
    }
}

/// The WGSL scalar type of a Gpu dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scalar {
    /// `f32`.
    F32,
    /// `i32`.
    I32,
}

impl Scalar {
    pub(crate) fn wgsl(self) -> &'static str {
        match self {
            Scalar::F32 => "f32",
            Scalar::I32 => "i32",
        }
    }
}

/// The helpers every shader may call: the uniform block and binary32 NaN-aware extrema
/// (IEEE 754-2019 maximum/minimum: NaN propagates, +0.0 is larger than −0.0).
const PRELUDE: &str = "struct Params {
    n: u32,
    m: u32,
    k: u32,
    scalar: u32,
    off0: u32,
    off1: u32,
    off2: u32,
    pad: u32,
}

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn fmax(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return a; }
    if (is_nan(b) || b > a) { return b; }
    if (a > b) { return a; }
    return bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b));
}

fn fmin(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return a; }
    if (is_nan(b) || b < a) { return b; }
    if (a < b) { return a; }
    return bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b));
}

fn neg_zero() -> f32 {
    return bitcast<f32>(0x80000000u);
}
";

fn header(inputs: usize, scalar: Scalar) -> String {
    let t = scalar.wgsl();
    let mut s = String::from(PRELUDE);
    for k in 0..inputs {
        let _ = writeln!(
            s,
            "@group(0) @binding({k}) var<storage, read> in{k}: array<{t}>;"
        );
    }
    let _ = writeln!(
        s,
        "@group(0) @binding({inputs}) var<storage, read_write> result: array<{t}>;"
    );
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<uniform> params: Params;",
        inputs + 1
    );
    s
}

const ENTRY: &str = "@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * 256u + lid;
    if (i >= params.n) { return; }
";

/// One elementwise operand: a tensor read through its access, or the call's scalar (from
/// `params.scalar`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Input {
    /// A tensor bound in order, read at access (plus `params.off{binding}` when `offset`
    /// is true; a tensor at offset 0 leaves the addition out of the shader).
    Tensor {
        /// How the operand is addressed.
        access: Access,
        /// Whether the operand's offset is added (it is not 0).
        offset: bool,
    },
    /// The weak scalar, as the bits of the shader's scalar type.
    Scalar,
}

/// An elementwise shader: `result[at_r(i)] = expr(a, b)` with `a`, `b` the inputs. With an
/// `overflow` condition (on `a`, `b` and the result `r`), an element meeting it raises the
/// atomic flag bound after the parameters.
pub(crate) fn elementwise(
    scalar: Scalar,
    expr: &str,
    overflow: Option<&str>,
    inputs: &[Input],
    result: &Access,
) -> String {
    let t = scalar.wgsl();
    let tensors = inputs
        .iter()
        .filter(|i| matches!(i, Input::Tensor { .. }))
        .count();
    let mut s = header(tensors, scalar);
    let mut binding = 0;
    let mut loads = String::new();
    for (k, input) in inputs.iter().enumerate() {
        let name = ["a", "b", "c"][k];
        match input {
            Input::Tensor { access, offset } => {
                s.push_str(&access.function(&format!("at{binding}")));
                let base = if *offset {
                    format!("params.off{binding} + ")
                } else {
                    String::new()
                };
                let _ = writeln!(loads, "    let {name} = in{binding}[{base}at{binding}(i)];");
                binding += 1;
            }
            Input::Scalar => {
                let _ = writeln!(loads, "    let {name} = bitcast<{t}>(params.scalar);");
            }
        }
    }
    if overflow.is_some() {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read_write> overflow: atomic<u32>;",
            tensors + 2
        );
    }
    s.push_str(&result.function("at_result"));
    s.push_str(ENTRY);
    s.push_str(&loads);
    let _ = writeln!(s, "    let r = {expr};");
    if let Some(condition) = overflow {
        let _ = writeln!(s, "    if ({condition}) {{ atomicStore(&overflow, 1u); }}");
    }
    s.push_str("    result[at_result(i)] = r;\n}\n");
    s
}

/// A reduction over mode 1: `result[at_r(i)] = fold_j x(i, j)` for `i < n`, `j < m`.
pub(crate) fn reduce(
    scalar: Scalar,
    maximum: bool,
    rows: &Access,
    columns: &Access,
    result: &Access,
) -> String {
    let t = scalar.wgsl();
    let mut s = header(1, scalar);
    s.push_str(&rows.function("at_row"));
    s.push_str(&columns.function("at_column"));
    s.push_str(&result.function("at_result"));
    s.push_str(ENTRY);
    s.push_str("    let base = params.off0 + at_row(i);\n");
    let (init, step) = match (maximum, scalar) {
        (false, _) => ("neg_zero()", "acc + v"),
        (true, Scalar::F32) => ("in0[base]", "fmax(acc, v)"),
        (true, Scalar::I32) => ("in0[base]", "max(acc, v)"),
    };
    let _ = writeln!(
        s,
        "    var acc: {t} = {init};\n    for (var j = {}u; j < params.m; j = j + 1u) {{\n        \
         let v = in0[base + at_column(j)];\n        acc = {step};\n    }}\n    \
         result[at_result(i)] = acc;\n}}",
        u32::from(maximum)
    );
    s
}

/// `(N,K)·(M,K) → (N,M)`: `result[at_r(o)] = Σ_k lhs(i, k) · rhs(j, k)` with `i = o mod N`,
/// `j = o / N` (`params.n` = N·M, `params.m` = N, `params.k` = K).
pub(crate) fn matmul(
    lhs_rows: &Access,
    lhs_inner: &Access,
    rhs_rows: &Access,
    rhs_inner: &Access,
    result: &Access,
) -> String {
    let mut s = header(2, Scalar::F32);
    s.push_str(&lhs_rows.function("at_lhs_row"));
    s.push_str(&lhs_inner.function("at_lhs_inner"));
    s.push_str(&rhs_rows.function("at_rhs_row"));
    s.push_str(&rhs_inner.function("at_rhs_inner"));
    s.push_str(&result.function("at_result"));
    s.push_str(ENTRY);
    s.push_str(
        "    let row = i % params.m;
    let column = i / params.m;
    let lhs = params.off0 + at_lhs_row(row);
    let rhs = params.off1 + at_rhs_row(column);
    var acc: f32 = neg_zero();
    for (var k = 0u; k < params.k; k = k + 1u) {
        acc = acc + in0[lhs + at_lhs_inner(k)] * in1[rhs + at_rhs_inner(k)];
    }
    result[at_result(i)] = acc;
}
",
    );
    s
}

/// The workgroup grid covering `n` invocations: `(x, y)` with `x · y · 256 ≥ n`, both at most
/// 65535, or `None` when `n` is too large for one dispatch.
pub(crate) fn grid(n: usize) -> Option<(u32, u32)> {
    let groups = n.div_ceil(WORKGROUP as usize).max(1);
    let x = groups.min(MAX_GROUPS as usize);
    let y = groups.div_ceil(x);
    (y <= MAX_GROUPS as usize).then_some((x as u32, y as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_covers_every_invocation_within_the_dimension_limit() {
        assert_eq!(grid(1), Some((1, 1)));
        assert_eq!(grid(256), Some((1, 1)));
        assert_eq!(grid(257), Some((2, 1)));
        assert_eq!(grid(65535 * 256), Some((65535, 1)));
        assert_eq!(grid(65535 * 256 + 1), Some((65535, 2)));
        let (x, y) = grid(16 << 20).unwrap();
        assert!(x as usize * y as usize * 256 >= 16 << 20);
        assert_eq!(grid(65535 * 65535 * 256 + 1), None);
    }

    #[test]
    fn baked_leaves_address_like_the_layout() {
        let access = Access::Leaves(vec![(3, 2), (4, 0), (2, 10)]);
        let code = access.function("at");
        assert!(code.contains("o = o + (r % 3u) * 2u;"), "{code}");
        assert!(code.contains("r = r / 4u;"), "{code}");
        assert!(code.contains("o = o + r * 10u;"), "{code}");
        assert_eq!(access.key(), "3:2,4:0,2:10");
    }
}
