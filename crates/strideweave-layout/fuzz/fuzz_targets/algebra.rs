//! Two layouts and a few integers decoded from the bytes, through every algebra and view
//! entry point: each must return `Ok` or `Err`, and a few cheap post-conditions must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strideweave_layout::{IndexMap, IntTuple, Layout, Shape, SliceKey, Stride, MAX_NESTING};

/// A cursor over the fuzzer's bytes; past the end every read is 0.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (&first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        first
    }

    fn word(&mut self) -> u64 {
        (0..8).fold(0, |w, _| (w << 8) | u64::from(self.byte()))
    }

    /// Small, a power of two up to 2^62, or anything below 2^62.
    fn value(&mut self) -> usize {
        match self.byte() % 4 {
            0 | 1 => usize::from(self.byte() % 16),
            2 => 1 << (self.byte() % 63),
            _ => (self.word() & ((1 << 62) - 1)) as usize,
        }
    }

    fn signed(&mut self) -> i64 {
        i64::from(self.byte() as i8)
    }

    fn layout(&mut self) -> Option<Layout> {
        let count = self.byte() % 8;
        let mut extents = Vec::new();
        let mut strides = Vec::new();
        for _ in 0..count {
            let (e, s) = (self.value(), self.value());
            if self.byte() % 3 == 0 {
                let (e2, s2) = (self.value(), self.value());
                extents.push(IntTuple::from(vec![e, e2]));
                strides.push(IntTuple::from(vec![s, s2]));
            } else {
                extents.push(IntTuple::from(e));
                strides.push(IntTuple::from(s));
            }
        }
        let (mut extents, mut strides) = (IntTuple::Tuple(extents), IntTuple::Tuple(strides));
        for _ in 0..usize::from(self.byte()) % (MAX_NESTING + 4) / 8 {
            extents = IntTuple::Tuple(vec![extents]);
            strides = IntTuple::Tuple(vec![strides]);
        }
        Layout::new(Shape::new(extents).ok()?, Stride::new(strides).ok()?).ok()
    }

    fn key(&mut self) -> SliceKey {
        match self.byte() % 3 {
            0 => SliceKey::Index(self.signed()),
            1 => SliceKey::all(),
            _ => SliceKey::Range {
                start: Some(self.signed()),
                stop: Some(self.signed()),
                step: Some(self.signed()),
            },
        }
    }
}

fn exercise(a: &Layout, b: &Layout, bytes: &mut Bytes<'_>) {
    assert_eq!(a.to_string().parse::<Layout>().as_ref(), Ok(a));
    let _ = Layout::from_modes(&a.modes());
    let coalesced = a.coalesce();
    let _ = a.filter();
    let ordinal = bytes.value();
    assert_eq!(coalesced.index_of(ordinal).ok(), a.index_of(ordinal).ok());
    if let Ok(coord) = a.shape().decode(ordinal) {
        assert_eq!(a.index(&coord), a.index_of(ordinal));
    }
    let _ = a.indices().take(64).count();
    let injective = a.try_is_injective();
    if a.size() <= 1 << 12 {
        let mut all: Vec<usize> = a.indices().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(injective, Ok(all.len() == a.size()), "{a}");
    }
    if let Ok(composed) = a.compose(b) {
        for i in 0..b.size().min(4) {
            assert_eq!(composed.apply(i), a.index_of(b.index_of(i).unwrap()));
        }
    }
    let _ = a.compose_shape(b.shape());
    let _ = a.compose_tiler(&b.modes());
    let _ = a.complement(bytes.value());
    let _ = a.divide(b);
    let _ = a.divide_tiler(&b.modes());
    let _ = a.zipped_divide(&b.modes());
    let _ = a.logical_product(b);
    let _ = a.blocked_product(b);
    let right = a.right_inverse();
    for i in 0..right.size().min(4) {
        assert_eq!(a.index_of(right.index_of(i).unwrap()), Ok(i));
    }
    let _ = a.left_inverse();
    let keys: Vec<SliceKey> = (0..a.rank().min(8)).map(|_| bytes.key()).collect();
    let _ = a.slice(&keys);
    let _ = a.reshape(b.shape());
    let _ = a.as_strided(b);
    let dims: Vec<usize> = (0..a.rank().min(8))
        .map(|_| usize::from(bytes.byte() % 8))
        .collect();
    let _ = a.broadcast_in_dim(b.shape(), &dims);
    let _ = a.broadcast_to(b.shape());
    let _ = a.unsqueeze(bytes.signed());
    let _ = a.squeeze(bytes.signed());
    let _ = a.permute(&dims);
    let _ = a.concat(b);
    let _ = a.append(b);
    let _ = a.uniform_preimage_extent(b.shape());
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = Bytes(data);
    let (Some(a), Some(b)) = (bytes.layout(), bytes.layout()) else {
        return;
    };
    exercise(&a, &b, &mut bytes);
    exercise(&b, &a, &mut bytes);
});
