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
/// `vec3<u32>` (low, middle, high words) and the sum of two, the signed 64-bit product of two i32 as
/// `vec2<u32>` (low, high), and the test that an accumulator narrows to i32.
const WIDE: &str = "fn sign_word(x: u32) -> u32 {
    return select(0u, 0xffffffffu, (x & 0x80000000u) != 0u);
}

fn wide_add3(a: vec3<u32>, b: vec3<u32>) -> vec3<u32> {
    let l = a.x + b.x;
    let c0 = select(0u, 1u, l < b.x);
    let m1 = a.y + b.y;
    let c1 = select(0u, 1u, m1 < b.y);
    let m = m1 + c0;
    let c2 = select(0u, 1u, m < c0);
    return vec3<u32>(l, m, a.z + b.z + c1 + c2);
}

fn wide_add(acc: vec3<u32>, lo: u32, hi: u32) -> vec3<u32> {
    return wide_add3(acc, vec3<u32>(lo, hi, sign_word(hi)));
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

/// The exact conversion of an Int32 to the nearest binary32, ties to even (Rust's `as f32`,
/// what the CPU computes): WGSL leaves the rounding of an integer beyond 2^24 to the
/// implementation, so the magnitude is rounded in integer arithmetic to 24 significant bits
/// and scaled by a power of two, which is exact.
const I32_TO_F32: &str = "fn i32_to_f32(x: i32) -> f32 {
    let u = select(bitcast<u32>(x), 0u - bitcast<u32>(x), x < 0);
    var r = f32(u);
    if (u >= 16777216u) {
        let shift = 8u - countLeadingZeros(u);
        let kept = u >> shift;
        let rest = u & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        let up = rest > half || (rest == half && (kept & 1u) == 1u);
        r = ldexp(f32(kept + select(0u, 1u, up)), i32(shift));
    }
    return select(r, -r, x < 0);
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
    scalar2: u32,
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
    typed_header(windows, |_| scalar.wgsl(), scalar.wgsl())
}

/// The prelude and bindings of a shader whose input `k` holds WGSL `input(k)` values and
/// whose result (or scratch output) holds `output` values.
fn typed_header<'a>(windows: &Windows, input: impl Fn(usize) -> &'a str, output: &str) -> String {
    let mut s = String::from(PRELUDE);
    let mut binding = 0;
    for (k, count) in windows.inputs.iter().enumerate() {
        windowed(&mut s, Some(k), input(k), binding, *count, windows.slots);
        binding += count;
    }
    windowed(&mut s, None, output, binding, windows.result, windows.slots);
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

/// One elementwise operand: a tensor read through its access, or one of the call's weak
/// scalars (from a `Params` field), each holding `scalar` values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Input {
    /// A tensor bound in order, read at access (plus `params.off{binding}` when `offset`
    /// is true; a tensor at offset 0 leaves the addition out of the shader).
    Tensor {
        /// How the operand is addressed.
        access: Access,
        /// Whether the operand's offset is added (it is not 0).
        offset: bool,
        /// What the computation reads it as (a `select` condition's are Bool words).
        scalar: Scalar,
        /// What its slots hold: `scalar`, or Int32 converted to Float32 on load.
        stored: Scalar,
    },
    /// A weak scalar, as the bits of `scalar` in `params.<field>`.
    Scalar {
        /// The `Params` field holding it (`scalar`, or `scalar2` for a second one).
        field: &'static str,
        /// Its type after conversion.
        scalar: Scalar,
    },
}

/// An elementwise shader with an `output` result (a comparison's result is a Bool word):
/// `result[at_r(i)] = expr(a, b, c)` with `a`, `b`, `c` the inputs in order. With an
/// `overflow` condition (on `a`, `b` and the result `r`), an element meeting it raises the
/// atomic flag bound after the parameters.
pub(crate) fn elementwise(
    output: Scalar,
    expr: &str,
    overflow: Option<&str>,
    inputs: &[Input],
    result: &Access,
    windows: &Windows,
) -> String {
    let tensors: Vec<&str> = inputs
        .iter()
        .filter_map(|input| match input {
            Input::Tensor { stored, .. } => Some(stored.wgsl()),
            Input::Scalar { .. } => None,
        })
        .collect();
    let mut s = typed_header(windows, |k| tensors[k], output.wgsl());
    let mut binding = 0;
    let mut loads = String::new();
    let mut converted = false;
    for (k, input) in inputs.iter().enumerate() {
        let name = ["a", "b", "c"][k];
        match input {
            Input::Tensor {
                access,
                offset,
                scalar,
                stored,
            } => {
                s.push_str(&access.function(&format!("at{binding}")));
                let base = if *offset {
                    format!("params.off{binding} + ")
                } else {
                    String::new()
                };
                let load = format!("load{binding}({base}at{binding}(i))");
                let value = if stored == scalar {
                    load
                } else {
                    converted = true;
                    format!("i32_to_f32({load})")
                };
                let _ = writeln!(loads, "    let {name} = {value};");
                binding += 1;
            }
            Input::Scalar { field, scalar } => {
                let _ = writeln!(
                    loads,
                    "    let {name} = bitcast<{}>(params.{field});",
                    scalar.wgsl()
                );
            }
        }
    }
    if overflow.is_some() {
        s.push_str(&overflow_declaration(windows));
    }
    if converted {
        s.push_str(I32_TO_F32);
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

/// A reduction over a short mode 1, one invocation per result: `result[at_r(i)] = fold_j
/// x(i, j)` for `i < n`, `j < m`, in ascending `j` (a plain loop: the caller keeps `m` far
/// below [`LOOP_BOUND`]). A sum accumulates in `accumulator` (binary32 from −0.0, binary64
/// from −0.0 rounded once, or exactly in 96 bits with the narrowing checked through the
/// overflow word); a maximum starts from the first element.
pub(crate) fn reduce(
    scalar: Scalar,
    maximum: bool,
    accumulator: Accumulator,
    rows: &Access,
    columns: &Access,
    result: &Access,
    windows: &Windows,
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
            false,
        )
    );
    s
}

/// What a pass of a tree reduction reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum TreeInput {
    /// The operand: element `(i, j)` at slot `params.off0 + at_row(i) + at_column(j)`.
    Operand {
        /// The access of mode 0 (the results).
        rows: Access,
        /// The access of mode 1 (the reduced mode).
        columns: Access,
    },
    /// The partial results of the previous pass: row `i`'s partial `j` at `i · params.m + j`.
    Partials,
}

/// Where a pass of a tree reduction writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum TreeOutput {
    /// The result, through its access (the last pass).
    Result(Access),
    /// One partial result per workgroup, workgroup `w` (row `w / params.k`, chunk
    /// `w mod params.k`) at `w`: the next pass's input.
    Partials,
}

/// The threads of one workgroup fold in workgroup memory: halving strides from 128 to 1.
const TREE: &str = "    part[lid] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) { part[lid] = combine(part[lid], part[lid + s]); }
        workgroupBarrier();
    }
";

/// One pass of a parallel reduction over mode 1. Workgroup `w` reduces chunk `w mod
/// params.k` of row `w / params.k` (rows below `params.n`; a chunk is `params.scalar · 256`
/// elements of the row's `params.m`): invocation `lid` folds the chunk's elements `lid`,
/// `lid + 256`, … in ascending order, then the workgroup folds its 256 partial values as a
/// tree in workgroup memory, and invocation 0 writes the total to the result or to the
/// partials the next pass reduces. A sum accumulates in `accumulator` (binary32 from −0.0;
/// binary64 from −0.0 with the partials kept in binary64 and the total rounded once; or
/// exactly in 96 bits, partials three words each, with the total's narrowing checked
/// through the overflow word); a maximum starts from the chunk's first element, which
/// invocations past the row's end keep (a maximum is idempotent). Every loop runs at most
/// `params.scalar` + 8 iterations.
pub(crate) fn reduce_tree(
    (scalar, maximum, accumulator): (Scalar, bool, Accumulator),
    input: &TreeInput,
    output: &TreeOutput,
    windows: &Windows,
) -> String {
    let t = scalar.wgsl();
    let wide = !maximum && accumulator == Accumulator::Wide;
    // The accumulator's type, the type its partials are stored as, and the fold's start
    // (a maximum's placeholder is replaced by the chunk's first element).
    let (acc, stored, zero) = match (maximum, accumulator) {
        (true, _) => (t, t, format!("{t}()")),
        (false, Accumulator::Native) => (t, t, "neg_zero()".to_string()),
        (false, Accumulator::F64) => ("f64", "f64", "f64(neg_zero())".to_string()),
        (false, Accumulator::Wide) => ("vec3<u32>", "u32", "vec3<u32>()".to_string()),
    };
    let input_type = match input {
        TreeInput::Operand { .. } => t,
        TreeInput::Partials => stored,
    };
    let output_type = match output {
        TreeOutput::Result(_) => t,
        TreeOutput::Partials => stored,
    };
    let mut s = typed_header(windows, |_| input_type, output_type);
    if wide {
        s.push_str(WIDE);
        if matches!(output, TreeOutput::Result(_)) {
            s.push_str(&overflow_declaration(windows));
        }
    }
    let element = match (input, wide) {
        (TreeInput::Operand { rows, columns }, _) => {
            s.push_str(&rows.function("at_row"));
            s.push_str(&columns.function("at_column"));
            let load = "load0(params.off0 + at_row(i) + at_column(j))";
            match (maximum, accumulator) {
                (false, Accumulator::F64) => format!("return f64({load});"),
                (false, Accumulator::Wide) => format!(
                    "let v = bitcast<u32>({load});\n    \
                     return vec3<u32>(v, sign_word(v), sign_word(v));"
                ),
                _ => format!("return {load};"),
            }
        }
        (TreeInput::Partials, true) => "let p = 3u * (i * params.m + j);\n    \
             return vec3<u32>(load0(p), load0(p + 1u), load0(p + 2u));"
            .to_string(),
        (TreeInput::Partials, false) => "return load0(i * params.m + j);".to_string(),
    };
    let _ = writeln!(
        s,
        "fn element(i: u32, j: u32) -> {acc} {{\n    {element}\n}}"
    );
    let combine = match (maximum, scalar, accumulator) {
        (true, Scalar::F32, _) => "fmax(a, b)",
        (true, _, _) => "max(a, b)",
        (false, _, Accumulator::Wide) => "wide_add3(a, b)",
        (false, _, _) => "a + b",
    };
    let _ = writeln!(
        s,
        "fn combine(a: {acc}, b: {acc}) -> {acc} {{\n    return {combine};\n}}\n\
         var<workgroup> part: array<{acc}, 256>;"
    );
    let store = match (output, wide) {
        (TreeOutput::Result(result), _) => {
            s.push_str(&result.function("at_result"));
            match (wide, accumulator) {
                (true, _) => {
                    "if (!wide_fits(total)) { atomicMax(&overflow, 0xffffffffu - row); }\n        \
                     store(at_result(row), bitcast<i32>(total.x));"
                        .to_string()
                }
                (false, Accumulator::F64) if !maximum => {
                    "store(at_result(row), f32(total));".to_string()
                }
                _ => "store(at_result(row), total);".to_string(),
            }
        }
        (TreeOutput::Partials, true) => "store(3u * w, total.x); store(3u * w + 1u, total.y); \
             store(3u * w + 2u, total.z);"
            .to_string(),
        (TreeOutput::Partials, false) => "store(w, total);".to_string(),
    };
    let start = if maximum {
        "        acc = element(row, first);\n"
    } else {
        ""
    };
    let _ = write!(
        s,
        "@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let w = wid.y * groups.x + wid.x;
    let row = w / params.k;
    let first = (w % params.k) * params.scalar * 256u;
    let live = row < params.n;
    var acc: {acc} = {zero};
    if (live) {{
{start}        for (var e = 0u; e < params.scalar; e = e + 1u) {{
            let j = first + e * 256u + lid;
            if (j < params.m) {{ acc = combine(acc, element(row, j)); }}
        }}
    }}
{TREE}    if (live && lid == 0u) {{
        let total = part[0];
        {store}
    }}
}}
"
    );
    s
}

/// `(N,K)·(M,K) → (N,M)` with the accesses of the lhs rows, lhs inner mode, rhs rows and rhs
/// inner mode (an operand marked in `converted` holds Int32 words, converted exactly to
/// binary32 on load by `i32_to_f32`): `result[at_r(o)] = Σ_k lhs(i, k) · rhs(j, k)` with `i = o mod N`,
/// `j = o / N` (`params.n` = N·M, `params.m` = N, `params.k` = K), in ascending `k`: binary32
/// products and sum from −0.0, binary64 products (exact for binary32 factors) and sum rounded
/// once, or exact 64-bit Int32 products summed in 96 bits with the narrowing checked through
/// the overflow word.
pub(crate) fn matmul(
    (scalar, converted): (Scalar, [bool; 2]),
    accumulator: Accumulator,
    [lhs_rows, lhs_inner, rhs_rows, rhs_inner]: &[Access; 4],
    result: &Access,
    (windows, long): (&Windows, bool),
) -> String {
    let stored = |k: usize| if converted[k] { "i32" } else { scalar.wgsl() };
    let mut s = typed_header(windows, stored, scalar.wgsl());
    if converted.contains(&true) {
        s.push_str(I32_TO_F32);
    }
    let load = |k: usize, at: &str| {
        let raw = format!("load{k}({at})");
        if converted[k] {
            format!("i32_to_f32({raw})")
        } else {
            raw
        }
    };
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
                "let a = {}; let b = {}; {step}",
                load(0, "lhs + at_lhs_inner(k)"),
                load(1, "rhs + at_rhs_inner(k)")
            ),
            long,
        )
    );
    s
}

/// The side of a workgroup tile of [`matmul_tiled`]: a workgroup of `TILE × TILE` = 256
/// invocations computes a `TILE × TILE` block of the result.
pub(crate) const TILE: usize = 16;

/// The longest contracted mode [`matmul_tiled`] takes: its invocations loop `K / 16` times
/// over tiles and `K` times within them, far below [`LOOP_BOUND`]; longer modes go to
/// [`matmul`].
pub(crate) const TILED_LONGEST: usize = 32768;

/// `(N,K)·(M,K) → (N,M)` on compact column-major Float32 operands and result, with
/// workgroup-memory tiles: workgroup `w` computes the result block of row tile `w mod T`
/// (`T = ⌈N / 16⌉`) and column tile `w / T` (`params.scalar` holds the column tiles); for
/// each step of 16 along the contracted mode its 256 invocations load a 16 × 16 tile of each
/// operand into workgroup memory (one element each, neighbouring invocations reading
/// neighbouring slots), wait at a barrier, and each adds its 16 products from the tiles. The
/// products are added in ascending `k` from −0.0, as [`matmul`] adds them, and only the
/// `min(16, K − k0)` real terms of the last step are added (no padding term can turn a −0.0
/// sum into +0.0). `params.n`, `params.m`, `params.k` = N, M, K; the accumulator is binary32
/// or binary64 (rounded once).
pub(crate) fn matmul_tiled(accumulator: Accumulator, windows: &Windows) -> String {
    let mut s = header(windows, Scalar::F32);
    let (declare, step, store) = match accumulator {
        Accumulator::F64 => (
            "var acc: f64 = f64(neg_zero());",
            "acc = acc + f64(tile_a[q * 16u + r]) * f64(tile_b[q * 16u + c]);",
            "f32(acc)",
        ),
        Accumulator::Native | Accumulator::Wide => (
            "var acc: f32 = neg_zero();",
            "acc = acc + tile_a[q * 16u + r] * tile_b[q * 16u + c];",
            "acc",
        ),
    };
    let _ = write!(
        s,
        "var<workgroup> tile_a: array<f32, 256>;
var<workgroup> tile_b: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {{
    let w = wid.y * groups.x + wid.x;
    let row_tiles = (params.n + 15u) / 16u;
    if (w >= row_tiles * params.scalar) {{ return; }}
    let r = lid.x;
    let c = lid.y;
    let row0 = (w % row_tiles) * 16u;
    let column0 = (w / row_tiles) * 16u;
    {declare}
    for (var k0 = 0u; k0 < params.k; k0 = k0 + 16u) {{
        let k = k0 + lid.y;
        var a = 0.0;
        if (row0 + lid.x < params.n && k < params.k) {{
            a = load0(params.off0 + row0 + lid.x + params.n * k);
        }}
        var b = 0.0;
        if (column0 + lid.x < params.m && k < params.k) {{
            b = load1(params.off1 + column0 + lid.x + params.m * k);
        }}
        tile_a[lid.y * 16u + lid.x] = a;
        tile_b[lid.y * 16u + lid.x] = b;
        workgroupBarrier();
        let count = min(16u, params.k - k0);
        for (var q = 0u; q < count; q = q + 1u) {{
            {step}
        }}
        workgroupBarrier();
    }}
    if (row0 + r < params.n && column0 + c < params.m) {{
        store(row0 + r + params.n * (column0 + c), {store});
    }}
}}
"
    );
    s
}

/// The most loop iterations a shader invocation runs on some drivers: Mesa's llvmpipe ends
/// every loop once the iterations of all loops of an invocation reach 65535 (its guard
/// against shaders that never finish), silently.
pub(crate) const LOOP_BOUND: usize = 65535;

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

/// The most elements one invocation of a tree pass folds before the workgroup's tree: a
/// workgroup reduces a chunk of up to `256 · 16` = 4096 elements.
pub(crate) const TREE_PER_INVOCATION: usize = 16;

/// The shortest mode reduced as a tree; shorter ones run one invocation per result.
pub(crate) const TREE_FROM: usize = 64;

/// The passes of a tree reduction over a mode of `m` elements, each `[mode, per_invocation,
/// groups]`: the pass reduces a mode of `mode` elements (the first `m`, each later one the
/// previous pass's `groups` partials) in `groups` workgroups per row whose invocations fold
/// `per_invocation` elements each. The last pass has one workgroup per row. A mode below
/// 2^32 takes at most three passes (4096 elements per workgroup: 2^32 → 2^20 → 256 → 1).
pub(crate) fn tree_passes(m: usize) -> Vec<[usize; 3]> {
    let workgroup = WORKGROUP as usize;
    let mut passes = Vec::new();
    let mut mode = m.max(1);
    loop {
        let per_invocation = mode.div_ceil(workgroup).clamp(1, TREE_PER_INVOCATION);
        let groups = mode.div_ceil(per_invocation * workgroup);
        passes.push([mode, per_invocation, groups]);
        if groups == 1 {
            return passes;
        }
        mode = groups;
    }
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
    fn tree_passes_fold_every_mode_in_at_most_three_short_passes() {
        assert_eq!(tree_passes(64), [[64, 1, 1]]);
        assert_eq!(tree_passes(257), [[257, 2, 1]]);
        assert_eq!(tree_passes(4096), [[4096, 16, 1]]);
        assert_eq!(tree_passes(4097), [[4097, 16, 2], [2, 1, 1]]);
        assert_eq!(tree_passes(1 << 24), [[1 << 24, 16, 4096], [4096, 16, 1]]);
        assert_eq!(
            tree_passes((1 << 24) + 1),
            [[(1 << 24) + 1, 16, 4097], [4097, 16, 2], [2, 1, 1]]
        );
        assert_eq!(tree_passes(u32::MAX as usize).len(), 3);
        for m in [64, 100, 4095, 65535, 65536, 4_190_145, 1 << 30] {
            let passes = tree_passes(m);
            assert_eq!(passes[0][0], m);
            for pair in passes.windows(2) {
                assert_eq!(
                    pair[1][0], pair[0][2],
                    "{m}: a pass reduces the last's partials"
                );
            }
            for &[mode, per, groups] in &passes {
                assert!(per <= TREE_PER_INVOCATION);
                assert!(groups * per * 256 >= mode && (groups - 1) * per * 256 < mode);
            }
            assert_eq!(passes.last().unwrap()[2], 1);
        }
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
