//! Arbitrary text through the notation parser: it must return `Ok` or `Err`, and what parses
//! must print back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strideweave_layout::{Layout, Shape, Stride};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match text.parse::<Layout>() {
        Ok(layout) => {
            assert_eq!(layout.to_string().parse::<Layout>().as_ref(), Ok(&layout));
            let _ = layout.modes();
            let _ = layout.coalesce();
            let _ = layout.try_is_injective();
        }
        Err(e) => assert!(e.message().chars().count() < 400, "{e}"),
    }
    if let Ok(shape) = text.parse::<Shape>() {
        assert_eq!(shape.to_string().parse::<Shape>().as_ref(), Ok(&shape));
    }
    let _ = text.parse::<Stride>();
});
