//! The binary32 extrema every kernel shares, so the reference and the fast kernels cannot
//! drift (docs/kernel-semantics.md: NaN propagates, +0.0 is larger than −0.0).

/// The larger of two binary32 values: the first NaN operand when either is NaN, and +0.0
/// over −0.0 (IEEE 754-2019 `maximum`).
#[inline(always)]
pub(crate) fn maximum_f32(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a {
        b
    } else if a > b || !a.is_sign_negative() {
        a
    } else {
        // Equal with `a` = −0.0: `b` is +0.0 or −0.0, never smaller.
        b
    }
}

/// The smaller of two binary32 values: the first NaN operand when either is NaN, and −0.0
/// under +0.0 (IEEE 754-2019 `minimum`).
#[inline(always)]
pub(crate) fn minimum_f32(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        a
    } else if b.is_nan() || b < a {
        b
    } else if a < b || a.is_sign_negative() {
        a
    } else {
        // Equal with `a` = +0.0: `b` is −0.0 or +0.0, never larger.
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extrema_propagate_nan_and_order_signed_zeros() {
        assert!(maximum_f32(f32::NAN, 1.0).is_nan());
        assert!(maximum_f32(1.0, f32::NAN).is_nan());
        assert!(minimum_f32(f32::NAN, 1.0).is_nan());
        assert!(minimum_f32(1.0, f32::NAN).is_nan());
        assert_eq!(maximum_f32(2.0, -3.0), 2.0);
        assert_eq!(minimum_f32(2.0, -3.0), -3.0);
        assert!(maximum_f32(-0.0, 0.0).is_sign_positive());
        assert!(maximum_f32(0.0, -0.0).is_sign_positive());
        assert!(minimum_f32(-0.0, 0.0).is_sign_negative());
        assert!(minimum_f32(0.0, -0.0).is_sign_negative());
        assert_eq!(maximum_f32(-1.0, -1.0), -1.0);
    }
}
