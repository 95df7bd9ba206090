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
    /// A Bool word: `u32`, 0 or 1.
    Bool,
}

impl Scalar {
    pub(crate) fn wgsl(self) -> &'static str {
        match self {
            Scalar::F32 => "f32",
            Scalar::I32 => "i32",
            Scalar::Bool => "u32",
        }
    }
}

/// What a reduction or product accumulates in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Accumulator {
    /// The element type itself (binary32 sums and products, maxima).
    Native,
    /// binary64, rounded to binary32 once (a Float32 plan accumulating in Float64).
    F64,
    /// A 96-bit two's complement integer (exact Int32 sums and products, narrowed once with
    /// a check: a sum of at most 2^32 products of two Int32 values cannot leave it).
    Wide,
}

impl Accumulator {
    /// The part of a specialization key this accumulator contributes.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Accumulator::Native => "native",
            Accumulator::F64 => "f64",
            Accumulator::Wide => "i96",
        }
    }
}

/// The exact-integer helpers of the [`Accumulator::Wide`] shaders: a 96-bit accumulator as
/// `vec3<u32>` (low, middle, high words), the signed 64-bit product of two i32 as
/// `vec2<u32>` (low, high), and the test that an accumulator narrows to i32.
const WIDE: &str = "fn sign_word(x: u32) -> u32 {
    return select(0u, 0xffffffffu, (x & 0x80000000u) != 0u);
}

fn wide_add(acc: vec3<u32>, lo: u32, hi: u32) -> vec3<u32> {
    let l = acc.x + lo;
    let c0 = select(0u, 1u, l < lo);
    let m1 = acc.y + hi;
    let c1 = select(0u, 1u, m1 < hi);
    let m = m1 + c0;
    let c2 = select(0u, 1u, m < c0);
    return vec3<u32>(l, m, acc.z + sign_word(hi) + c1 + c2);
}

fn wide_mul(a: i32, b: i32) -> vec2<u32> {
    let ua = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0);
    let ub = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0);
    let a0 = ua & 0xffffu;
    let a1 = ua >> 16u;
    let b0 = ub & 0xffffu;
    let b1 = ub >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    let lo = (p00 & 0xffffu) | (mid << 16u);
    let hi = a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
    if ((a < 0) != (b < 0)) {
        let nlo = ~lo + 1u;
        return vec2<u32>(nlo, ~hi + select(0u, 1u, nlo == 0u));
    }
    return vec2<u32>(lo, hi);
}

fn wide_fits(acc: vec3<u32>) -> bool {
    let s = sign_word(acc.x);
    return acc.y == s && acc.z == s;
}
";

/// The declaration of the overflow word of a checked shader: one `atomic<u32>` after the
/// parameter block.
fn overflow_declaration(windows: &Windows) -> String {
    format!(
        "@group(0) @binding({}) var<storage, read_write> overflow: atomic<u32>;\n",
        windows.overflow_binding()
    )
}

/// The WGSL statement a checked reduction or product runs for result ordinal `i` whose wide
/// accumulator does not narrow: the overflow word keeps the largest `0xffffffff - i`, so it
/// is nonzero exactly when some result overflowed and names the smallest such ordinal.
const REPORT_ORDINAL: &str =
    "    if (!wide_fits(acc)) { atomicMax(&overflow, 0xffffffffu - i); }\n";

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

/// How many bindings each tensor input and the result take: a buffer within the device's
/// storage binding limit is one binding, a larger one is bound as consecutive windows of
/// `slots` slots each (the last one shorter), read through `load<k>` and written through
/// `store`, which pick the window of a slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Windows {
    /// The windows of each tensor input, in binding order.
    pub(crate) inputs: Vec<u32>,
    /// The windows of the result.
    pub(crate) result: u32,
    /// The slots of every window but the last.
    pub(crate) slots: u32,
}

impl Windows {
    /// The storage-buffer bindings (every binding but the parameter block).
    pub(crate) fn storage_bindings(&self, checked: bool) -> u32 {
        self.inputs.iter().sum::<u32>() + self.result + u32::from(checked)
    }

    /// The binding of the parameter block (after every window).
    fn params_binding(&self) -> u32 {
        self.storage_bindings(false)
    }

    /// The binding of the overflow word of a checked shader (after the parameter block).
    fn overflow_binding(&self) -> u32 {
        self.params_binding() + 1
    }

    /// The part of a specialization key the windows contribute: empty when every buffer is
    /// one binding, so the common pipelines keep their keys.
    pub(crate) fn key(&self) -> String {
        if self.inputs.iter().all(|w| *w == 1) && self.result == 1 {
            return String::new();
        }
        let inputs: Vec<String> = self.inputs.iter().map(u32::to_string).collect();
        format!("|w{}:{}x{}", inputs.join(","), self.result, self.slots)
    }
}

/// The declarations of `count` windows of the input `input` (`in<k>`, `in<k>_<w>`) or, for
/// `None`, of the result (`result`, `result_<w>`) from binding `first`, and their access
/// function: `fn load<k>(s) -> T` for an input, `fn store(s, v)` for the result.
fn windowed(s: &mut String, input: Option<usize>, t: &str, first: u32, count: u32, slots: u32) {
    let (name, access) = match input {
        Some(k) => (format!("in{k}"), "read"),
        None => ("result".to_string(), "read_write"),
    };
    let window = |w: u32| {
        if count == 1 {
            name.clone()
        } else {
            format!("{name}_{w}")
        }
    };
    for w in 0..count {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, {access}> {}: array<{t}>;",
            first + w,
            window(w)
        );
    }
    let body = |w: u32| {
        let index = if w == 0 {
            "s".to_string()
        } else {
            format!("s - {}u", u64::from(w) * u64::from(slots))
        };
        match input {
            Some(_) => format!("return {}[{index}];", window(w)),
            None => format!("{}[{index}] = v; return;", window(w)),
        }
    };
    match input {
        Some(k) => {
            let _ = writeln!(s, "fn load{k}(s: u32) -> {t} {{");
        }
        None => {
            let _ = writeln!(s, "fn store(s: u32, v: {t}) {{");
        }
    }
    for w in 0..count - 1 {
        let bound = u64::from(w + 1) * u64::from(slots);
        let _ = writeln!(s, "    if (s < {bound}u) {{ {} }}", body(w));
    }
    let _ = writeln!(s, "    {}\n}}", body(count - 1));
}

fn header(windows: &Windows, scalar: Scalar) -> String {
    typed_header(windows, scalar, scalar)
}

/// The prelude and bindings of a shader whose inputs hold `input` and whose result holds
/// `output`.
fn typed_header(windows: &Windows, input: Scalar, output: Scalar) -> String {
    let mut s = String::from(PRELUDE);
    let mut binding = 0;
    for (k, count) in windows.inputs.iter().enumerate() {
        windowed(
            &mut s,
            Some(k),
            input.wgsl(),
            binding,
            *count,
            windows.slots,
        );
        binding += count;
    }
    windowed(
        &mut s,
        None,
        output.wgsl(),
        binding,
        windows.result,
        windows.slots,
    );
    let _ = writeln!(
        s,
        "@group(0) @binding({}) var<uniform> params: Params;",
        windows.params_binding()
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

/// An elementwise shader on `scalar` inputs with an `output` result (a comparison's result
/// is a Bool word): `result[at_r(i)] = expr(a, b)` with `a`, `b` the inputs. With an
/// `overflow` condition (on `a`, `b` and the result `r`), an element meeting it raises the
/// atomic flag bound after the parameters.
pub(crate) fn elementwise(
    (scalar, output): (Scalar, Scalar),
    expr: &str,
    overflow: Option<&str>,
    inputs: &[Input],
    result: &Access,
    windows: &Windows,
) -> String {
    let t = scalar.wgsl();
    let mut s = typed_header(windows, scalar, output);
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
                let _ = writeln!(
                    loads,
                    "    let {name} = load{binding}({base}at{binding}(i));"
                );
                binding += 1;
            }
            Input::Scalar => {
                let _ = writeln!(loads, "    let {name} = bitcast<{t}>(params.scalar);");
            }
        }
    }
    if overflow.is_some() {
        s.push_str(&overflow_declaration(windows));
    }
    s.push_str(&result.function("at_result"));
    s.push_str(ENTRY);
    s.push_str(&loads);
    let _ = writeln!(s, "    let r = {expr};");
    if let Some(condition) = overflow {
        let _ = writeln!(s, "    if ({condition}) {{ atomicStore(&overflow, 1u); }}");
    }
    s.push_str("    store(at_result(i), r);\n}\n");
    s
}

/// A reduction over mode 1: `result[at_r(i)] = fold_j x(i, j)` for `i < n`, `j < m`, in
/// ascending `j`. A sum accumulates in `accumulator` (binary32 from −0.0, binary64 from −0.0
/// rounded once, or exactly in 96 bits with the narrowing checked through the overflow word);
/// a maximum starts from the first element.
pub(crate) fn reduce(
    scalar: Scalar,
    maximum: bool,
    accumulator: Accumulator,
    rows: &Access,
    columns: &Access,
    result: &Access,
    (windows, long): (&Windows, bool),
) -> String {
    let t = scalar.wgsl();
    let mut s = header(windows, scalar);
    if accumulator == Accumulator::Wide {
        s.push_str(WIDE);
        s.push_str(&overflow_declaration(windows));
    }
    s.push_str(&rows.function("at_row"));
    s.push_str(&columns.function("at_column"));
    s.push_str(&result.function("at_result"));
    s.push_str(ENTRY);
    s.push_str("    let base = params.off0 + at_row(i);\n");
    let (declare, step, store) = match (maximum, scalar, accumulator) {
        (false, _, Accumulator::Wide) => (
            "var acc = vec3<u32>(0u, 0u, 0u);".to_string(),
            "wide_add(acc, bitcast<u32>(v), sign_word(bitcast<u32>(v)))",
            format!("{REPORT_ORDINAL}    store(at_result(i), bitcast<i32>(acc.x));"),
        ),
        (false, _, Accumulator::F64) => (
            "var acc: f64 = f64(neg_zero());".to_string(),
            "acc + f64(v)",
            "    store(at_result(i), f32(acc));".to_string(),
        ),
        (false, _, Accumulator::Native) => (
            format!("var acc: {t} = neg_zero();"),
            "acc + v",
            "    store(at_result(i), acc);".to_string(),
        ),
        (true, Scalar::F32, _) => (
            format!("var acc: {t} = load0(base);"),
            "fmax(acc, v)",
            "    store(at_result(i), acc);".to_string(),
        ),
        (true, Scalar::I32 | Scalar::Bool, _) => (
            format!("var acc: {t} = load0(base);"),
            "max(acc, v)",
            "    store(at_result(i), acc);".to_string(),
        ),
    };
    let _ = writeln!(
        s,
        "    {declare}\n{}{store}\n}}",
        bounded_loop(
            "j",
            if maximum { "1u" } else { "0u" },
            "params.m",
            &format!("let v = load0(base + at_column(j)); acc = {step};"),
            long,
        )
    );
    s
}

/// `(N,K)·(M,K) → (N,M)` with the accesses of the lhs rows, lhs inner mode, rhs rows and rhs
/// inner mode: `result[at_r(o)] = Σ_k lhs(i, k) · rhs(j, k)` with `i = o mod N`,
/// `j = o / N` (`params.n` = N·M, `params.m` = N, `params.k` = K), in ascending `k`: binary32
/// products and sum from −0.0, binary64 products (exact for binary32 factors) and sum rounded
/// once, or exact 64-bit Int32 products summed in 96 bits with the narrowing checked through
/// the overflow word.
pub(crate) fn matmul(
    scalar: Scalar,
    accumulator: Accumulator,
    [lhs_rows, lhs_inner, rhs_rows, rhs_inner]: &[Access; 4],
    result: &Access,
    (windows, long): (&Windows, bool),
) -> String {
    let mut s = header(windows, scalar);
    if accumulator == Accumulator::Wide {
        s.push_str(WIDE);
        s.push_str(&overflow_declaration(windows));
    }
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
",
    );
    let (declare, step, store) = match accumulator {
        Accumulator::Native => (
            "var acc: f32 = neg_zero();",
            "acc = acc + a * b;",
            "    store(at_result(i), acc);\n".to_string(),
        ),
        Accumulator::F64 => (
            "var acc: f64 = f64(neg_zero());",
            "acc = acc + f64(a) * f64(b);",
            "    store(at_result(i), f32(acc));\n".to_string(),
        ),
        Accumulator::Wide => (
            "var acc = vec3<u32>(0u, 0u, 0u);",
            "let p = wide_mul(a, b);\n        acc = wide_add(acc, p.x, p.y);",
            format!("{REPORT_ORDINAL}    store(at_result(i), bitcast<i32>(acc.x));\n"),
        ),
    };
    let _ = write!(
        s,
        "    {declare}\n{}{store}}}\n",
        bounded_loop(
            "k",
            "0u",
            "params.k",
            &format!(
                "let a = load0(lhs + at_lhs_inner(k)); let b = load1(rhs + at_rhs_inner(k)); \
                 {step}"
            ),
            long,
        )
    );
    s
}

/// The most loop iterations a shader invocation runs on some drivers: Mesa's llvmpipe ends
/// every loop once the iterations of all loops of an invocation reach 65535 (its guard
/// against shaders that never finish), silently.
const LOOP_BOUND: usize = 65535;

/// The elements one iteration of a reduction loop visits, written out one after another.
const UNROLL: usize = 64;

/// The longest mode a reduction or product loop covers within [`LOOP_BOUND`] iterations:
/// preparation declines longer modes.
pub(crate) const LONGEST_MODE: usize = (LOOP_BOUND - UNROLL) * UNROLL;

/// Whether a reduced mode of `extent` elements needs the long form of [`bounded_loop`].
pub(crate) fn is_long(extent: usize) -> bool {
    extent >= LOOP_BOUND
}

/// A loop of `var` over `start..end` (WGSL `u32` expressions) running `body` (which reads
/// `var`). A `long` loop (a mode of [`LOOP_BOUND`] elements or more) runs blocks of
/// [`UNROLL`] elements written out without a loop, then a loop over the last partial block:
/// fewer than `end / UNROLL + UNROLL` loop iterations in all, within [`LOOP_BOUND`] for modes up
/// to [`LONGEST_MODE`]. Other loops are plain (the written-out blocks cost compile time).
fn bounded_loop(var: &str, start: &str, end: &str, body: &str, long: bool) -> String {
    if !long {
        return format!(
            "    for (var {var} = {start}; {var} < {end}; {var} = {var} + 1u) {{\n        \
             {body}\n    }}\n"
        );
    }
    // The partial block's loop follows the blocks' loop rather than sitting in it: llvmpipe
    // runs both sides of a branch under a lane mask, so a loop inside the blocks' loop would
    // count one more iteration per block.
    let mut s = String::new();
    let _ = writeln!(
        s,
        "    let {var}_full = {start} + ({end} - {start}) / {UNROLL}u * {UNROLL}u;\n    \
         for (var {var}_block = {start}; {var}_block < {var}_full; \
         {var}_block = {var}_block + {UNROLL}u) {{"
    );
    for step in 0..UNROLL {
        let _ = writeln!(s, "        {{ let {var} = {var}_block + {step}u; {body} }}");
    }
    let _ = writeln!(
        s,
        "    }}\n    for (var {var} = {var}_full; {var} < {end}; {var} = {var} + 1u) {{ \
         {body} }}"
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
    fn a_buffer_beyond_the_binding_limit_is_read_and_written_through_windows() {
        let windows = Windows {
            inputs: vec![3, 1],
            result: 2,
            slots: 100,
        };
        assert_eq!(windows.storage_bindings(true), 7);
        assert_eq!(windows.key(), "|w3,1:2x100");
        let code = header(&windows, Scalar::F32);
        assert!(
            code.contains("@binding(2) var<storage, read> in0_2"),
            "{code}"
        );
        assert!(
            code.contains("@binding(3) var<storage, read> in1:"),
            "{code}"
        );
        assert!(
            code.contains("@binding(5) var<storage, read_write> result_1"),
            "{code}"
        );
        assert!(code.contains("@binding(6) var<uniform> params"), "{code}");
        assert!(
            code.contains("if (s < 200u) { return in0_1[s - 100u]; }"),
            "{code}"
        );
        assert!(code.contains("    return in0_2[s - 200u];"), "{code}");
        assert!(
            code.contains("    result_1[s - 100u] = v; return;"),
            "{code}"
        );
        assert!(
            code.contains("fn load1(s: u32) -> f32 {\n    return in1[s];"),
            "{code}"
        );
        let single = Windows {
            inputs: vec![1],
            result: 1,
            slots: 100,
        };
        assert_eq!(single.key(), "");
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
