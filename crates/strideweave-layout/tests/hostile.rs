//! Hostile input: every entry point of the layout crate returns `Ok` or `Err` — quickly, on a
//! 2 MiB stack, without panicking — whatever it is given: deep nesting (up to 100,000
//! levels), sizes up to 2^62, values beyond `i64`, malformed and binary text.
//!
//! Each test runs in a child process (this test binary re-invoked with `--exact` and
//! [`CHILD`] set), so an abort — a stack overflow or a failed allocation — fails that test
//! instead of killing the whole run; the child's address space is capped where `sh` and
//! `ulimit` exist. Inside the child every case runs on its own thread with a 2 MiB stack and
//! fails if it takes longer than [`CASE_LIMIT`].

use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use strideweave_layout::{
    Composition, IndexMap, IntTuple, Layout, LayoutError, Shape, SliceKey, Stride, Tree, TreeNode,
    INJECTIVITY_SEARCH_BUDGET, MAX_NESTING, QUOTE_LIMIT,
};

/// The environment variable that tells a re-invoked test binary which test to run in
/// earnest.
const CHILD: &str = "STRIDEWEAVE_LAYOUT_HOSTILE_CHILD";
/// The stack of every case's thread: the default of a spawned Rust thread.
const STACK: usize = 2 << 20;
/// The longest one case may take (debug build, two busy cores).
const CASE_LIMIT: Duration = Duration::from_secs(5);
/// The longest one child process may take.
const CHILD_LIMIT: Duration = Duration::from_secs(120);
/// The child's address-space cap, in KiB (`ulimit -v`): an unbounded allocation aborts
/// there instead of exhausting the machine.
const CHILD_MEMORY_KIB: u64 = 8 << 20;

/// Runs `body` in a child process that runs only the test `name`; fails when the child
/// fails, aborts or overruns [`CHILD_LIMIT`].
fn isolated(name: &str, body: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let test_args = [name, "--exact", "--nocapture", "--test-threads", "1"];
    let mut command = if cfg!(unix) && std::path::Path::new("/bin/sh").exists() {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(format!(
                "ulimit -v {CHILD_MEMORY_KIB} 2>/dev/null; exec \"$0\" \"$@\""
            ))
            .arg(&exe)
            .args(test_args);
        command
    } else {
        let mut command = Command::new(&exe);
        command.args(test_args);
        command
    };
    let mut child = command
        .env(CHILD, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("re-invoke the test binary");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if started.elapsed() > CHILD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: the child process took longer than {CHILD_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().expect("the child's output");
    let tail = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        let chars: Vec<char> = text.chars().collect();
        chars[chars.len().saturating_sub(3000)..]
            .iter()
            .collect::<String>()
    };
    let stdout = tail(&output.stdout);
    assert!(
        status.success() && stdout.contains("1 passed"),
        "{name}: the child process failed ({status}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        tail(&output.stderr)
    );
}

/// Runs `f` on a fresh thread with a 2 MiB stack; fails when it panics or takes longer than
/// [`CASE_LIMIT`].
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            let _ = sender.send(f());
        })
        .expect("spawn a case thread");
    match receiver.recv_timeout(CASE_LIMIT) {
        Ok(value) => {
            let _ = handle.join();
            value
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what}: took longer than {CASE_LIMIT:?}"),
        Err(RecvTimeoutError::Disconnected) => {
            let payload = handle
                .join()
                .expect_err("a thread that sent nothing panicked");
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{what}: panicked: {message}")
        }
    }
}

/// The message of an expected failure.
fn error<T: std::fmt::Debug>(result: Result<T, LayoutError>) -> String {
    result.expect_err("expected a layout error").to_string()
}

/// `(((…(2)…)))`: `depth` levels of tuple around one integer (`IntTuple::depth` = `depth`).
fn nested_int_tuple(depth: usize) -> IntTuple {
    let mut tree = IntTuple::Int(2);
    for _ in 0..depth {
        tree = IntTuple::Tuple(vec![tree]);
    }
    tree
}

/// Drops a written tree of any depth without recursion (the derived drop recurses).
fn drop_deep(tree: IntTuple) {
    let mut stack = vec![tree];
    while let Some(node) = stack.pop() {
        if let IntTuple::Tuple(items) = node {
            stack.extend(items);
        }
    }
}

fn nesting_message(depth: usize) -> String {
    format!("nests {depth} levels deep, beyond the limit of {MAX_NESTING} levels (MAX_NESTING)")
}

// ---------------------------------------------------------------------------------------
// Regressions, one per reproducer.

#[test]
fn parse_of_50000_nested_parentheses_is_a_nesting_error() {
    isolated(
        "parse_of_50000_nested_parentheses_is_a_nesting_error",
        || {
            bounded("deep parse", || {
                let closed = "(".repeat(50_000) + "1" + &")".repeat(50_000);
                let open = "(".repeat(50_000) + "1";
                for text in [&closed, &open] {
                    let layout_text = format!("{text}:{text}");
                    for message in [
                        error(layout_text.parse::<Layout>()),
                        error(text.parse::<Shape>()),
                        error(text.parse::<Stride>()),
                    ] {
                        assert!(message.contains(&nesting_message(50_000)), "{message}");
                        assert!(message.starts_with("malformed "), "{message}");
                        assert!(message.contains("…"), "{message}");
                        assert!(message.chars().count() < 300, "{message}");
                    }
                }
                // The limit itself is accepted, one more level is not.
                let at_limit = "(".repeat(MAX_NESTING) + "3" + &")".repeat(MAX_NESTING);
                let shape: Shape = at_limit.parse().expect("MAX_NESTING levels parse");
                assert_eq!((shape.depth(), shape.size()), (MAX_NESTING, 3));
                let layout: Layout = format!("{at_limit}:{at_limit}").parse().expect("parses");
                assert_eq!(layout.to_string().parse::<Layout>(), Ok(layout.clone()));
                let beyond = format!("({at_limit})");
                assert!(error(beyond.parse::<Shape>()).contains(&nesting_message(MAX_NESTING + 1)));
            });
        },
    );
}

#[test]
fn deep_written_trees_are_rejected_without_recursion() {
    isolated("deep_written_trees_are_rejected_without_recursion", || {
        bounded("deep written trees", || {
            for depth in [MAX_NESTING + 1, 2_000, 100_000] {
                let message = error(Shape::new(nested_int_tuple(depth)));
                assert_eq!(message, format!("Shape {}", nesting_message(depth)));
                let message = error(Stride::new(nested_int_tuple(depth)));
                assert_eq!(message, format!("Stride {}", nesting_message(depth)));
                // A coordinate deeper than its shape fails at the shape's leaf.
                let coord = IntTuple::Tuple(vec![IntTuple::Int(0), nested_int_tuple(depth)]);
                assert_eq!(coord.depth(), depth + 1);
                let layout: Layout = "(2,3):(1,2)".parse().unwrap();
                let message = error(layout.index(&coord));
                assert!(
                    message.contains("… has more nesting than mode 1 of Shape (2,3)"),
                    "{message}"
                );
                assert!(message.chars().count() < 300, "{message}");
                // Display is iterative too.
                assert_eq!(coord.to_string().len(), 2 * depth + 5);
                drop_deep(coord);
                // A rearrange tree as deep.
                let mut tree = Tree::new([TreeNode::Id(0)]);
                for _ in 1..depth {
                    tree = Tree::new([TreeNode::Tree(tree)]);
                }
                assert_eq!((tree.depth(), tree.size()), (depth, 1));
                assert_eq!(tree.recipe().len(), 2 * depth - 1);
                let one: Layout = "4:1".parse().unwrap();
                let message = error(one.rearrange(&tree, None));
                assert_eq!(
                    message,
                    format!("rearrange output tree {}", nesting_message(depth))
                );
                let message = error(one.rearrange(&Tree::new([TreeNode::Id(0)]), Some(&tree)));
                assert_eq!(
                    message,
                    format!("rearrange selection tree {}", nesting_message(depth))
                );
            }
            assert_eq!(
                Shape::new(nested_int_tuple(MAX_NESTING)).unwrap().depth(),
                MAX_NESTING
            );
        });
    });
}

#[test]
fn modes_of_nested_layouts_run_on_a_small_stack() {
    isolated("modes_of_nested_layouts_run_on_a_small_stack", || {
        bounded("2,000-level nesting by the algebra", || {
            // Each step nests the layout one level deeper; past MAX_NESTING it must fail.
            let pad: Layout = "1:0".parse().unwrap();
            let mut layout: Layout = "(2,1):(1,0)".parse().unwrap();
            let mut failure = None;
            for _ in 0..2_000 {
                match Layout::from_modes(&[layout.clone(), pad.clone()]) {
                    Ok(deeper) => layout = deeper,
                    Err(e) => {
                        failure = Some(e.to_string());
                        break;
                    }
                }
            }
            assert_eq!(
                failure,
                Some(format!("Layout {}", nesting_message(MAX_NESTING + 1)))
            );
            assert_eq!(layout.depth(), MAX_NESTING);
            // The deepest layout there is: every walk over it fits the small stack.
            let modes = layout.modes();
            assert_eq!(modes.len(), 2);
            assert_eq!(Layout::from_modes(&modes).unwrap(), layout);
            assert_eq!(layout.to_string().parse::<Layout>(), Ok(layout.clone()));
            assert_eq!(layout.coalesce().to_string(), "2:1");
            assert!(layout.try_is_injective().unwrap());
            let _ = layout.shape().to_int_tuple();
            let _ = layout.shape().decode(1).unwrap();
            assert_eq!(layout.index(&layout.shape().decode(1).unwrap()), Ok(1));
            let tile: Layout = "2:1".parse().unwrap();
            let _ = layout.compose(&layout);
            let _ = layout.divide(&tile);
            let _ = layout.logical_product(&layout);
            let _ = layout.blocked_product(&layout);
            let _ = layout.append(&layout);
            let _ = layout.zipped_divide(std::slice::from_ref(&tile));
            let _ = layout.left_inverse();
            let _ = layout.as_strided(&tile);
            let message = error(layout.append(&layout));
            assert!(
                message.contains(&nesting_message(MAX_NESTING + 1)),
                "{message}"
            );
        });
    });
}

#[test]
fn injectivity_of_huge_extents_is_decided_at_once() {
    isolated("injectivity_of_huge_extents_is_decided_at_once", || {
        for (text, injective) in [
            ("(3,1099511627776):(2,3)", true),
            ("(3,16777216):(2,3)", true),
            ("(4,1099511627776):(2,3)", false),
            ("(2,3):(3,1)", true),
            ("(3,2):(2,3)", true),
            ("(4,3):(2,3)", false),
            ("(2,2,2):(5,6,7)", true),
            ("(2,2,2):(3,5,8)", false),
        ] {
            bounded(text, move || {
                let started = Instant::now();
                let layout: Layout = text.parse().unwrap();
                assert_eq!(layout.try_is_injective(), Ok(injective), "{text}");
                assert_eq!(layout.is_injective(), injective, "{text}");
                assert_eq!(layout.injectivity(), Some(injective), "{text}");
                // The operations that need injectivity reach the decision too.
                let _ = layout.complement(layout.cosize());
                let _ = layout.left_inverse();
                let _ = layout.divide(&"3:1".parse().unwrap());
                let _ = layout.logical_product(&"2:1".parse().unwrap());
                let _ = layout.blocked_product(&"2:1".parse().unwrap());
                let _ = Layout::column_major(layout.shape().clone()).as_strided(&layout);
                assert!(started.elapsed() < Duration::from_secs(1), "{text}");
            });
        }
    });
}

/// An operation on a layout that needs its injectivity.
type Operation = fn(&Layout) -> Result<Layout, LayoutError>;

/// 16 leaves of extent 2 with large unrelated strides: the reductions leave them all, and
/// the exact search cannot finish inside its budget.
fn undecidable_layout() -> Layout {
    let mut state = 7u64;
    let mut strides = Vec::new();
    for _ in 0..16 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        strides.push((1usize << 44) + ((state >> 20) as usize % (1usize << 44)));
    }
    Layout::from_flat(&[2; 16], &strides).unwrap()
}

#[test]
fn an_exhausted_injectivity_budget_is_an_error_not_a_guess() {
    isolated(
        "an_exhausted_injectivity_budget_is_an_error_not_a_guess",
        || {
            // Each call runs the whole budgeted search, so each gets its own time bound.
            let message = bounded("try_is_injective", || {
                error(undecidable_layout().try_is_injective())
            });
            let expected = format!(
            "is undecided: the exact search exceeded its budget of {INJECTIVITY_SEARCH_BUDGET} candidates (INJECTIVITY_SEARCH_BUDGET)"
        );
            assert!(message.starts_with("injectivity of Layout ("), "{message}");
            assert!(message.ends_with(&expected), "{message}");
            assert!(message.contains("…"), "{message}");
            // Not proven injective; the operations that need it report the budget.
            assert!(!bounded("is_injective", || undecidable_layout().is_injective()));
            assert_eq!(
                bounded("injectivity", || undecidable_layout().injectivity()),
                None
            );
            let operations: [(&str, Operation); 4] = [
                ("complement", |l| l.complement(1 << 62)),
                ("left_inverse", |l| l.left_inverse()),
                ("logical_product", |l| {
                    l.logical_product(&"2:1".parse().unwrap())
                }),
                ("as_strided", |l| {
                    Layout::column_major(Shape::new(1i64 << 62).unwrap()).as_strided(l)
                }),
            ];
            for (name, operation) in operations {
                let message = bounded(name, move || error(operation(&undecidable_layout())));
                assert!(
                    message.contains("INJECTIVITY_SEARCH_BUDGET"),
                    "{name}: {message}"
                );
            }
        },
    );
}

#[test]
fn values_beyond_i64_are_rejected_by_value() {
    isolated("values_beyond_i64_are_rejected_by_value", || {
        let max = u64::MAX.to_string();
        assert_eq!(
            error(Shape::new(u64::MAX)),
            format!("Shape extent {max} exceeds i64::MAX")
        );
        assert_eq!(
            error(Stride::new(u64::MAX)),
            format!("Stride value {max} exceeds i64::MAX")
        );
        assert_eq!(
            error(Shape::new((2usize, (3usize, usize::MAX)))),
            format!("Shape extent {} exceeds i64::MAX", usize::MAX)
        );
        assert_eq!(
            error(Stride::new((1u64, 1u64 << 63))),
            format!("Stride value {} exceeds i64::MAX", 1u64 << 63)
        );
        assert_eq!(
            error(Shape::new(i128::MAX)),
            format!("Shape extent {} exceeds i64::MAX", i128::MAX)
        );
        assert_eq!(
            error(Stride::new(i128::MIN)),
            format!("Stride values must be >= 0, got {}", i128::MIN)
        );
        assert_eq!(IntTuple::from(u64::MAX), IntTuple::Wide(u64::MAX as i128));
        assert_eq!(IntTuple::from(7u64), IntTuple::Int(7));
        assert_eq!(
            IntTuple::from((1u64, u64::MAX)).to_string(),
            format!("(1,{max})")
        );
        // The largest representable values are still accepted.
        assert_eq!(
            Shape::new(i64::MAX as u64).unwrap().size(),
            i64::MAX as usize
        );
        assert_eq!(
            Stride::new(i64::MAX as u64).unwrap().leaves(),
            [i64::MAX as usize]
        );
        // A wide coordinate is out of range by its value.
        let layout: Layout = "(4,2):(1,4)".parse().unwrap();
        assert!(error(layout.index(&(u64::MAX, 0u64).into()))
            .contains(&format!("coordinate {max} is out of range [0, 4)")));
        assert!(error(layout.shape().encode(&IntTuple::from(usize::MAX)))
            .contains(&format!("coordinate {} is out of range [0, 8)", usize::MAX)));
        // Flat constructors take usize and check the same bound.
        assert!(error(Shape::flat(&[usize::MAX])).contains("overflows i64"));
        assert!(error(Stride::flat(&[usize::MAX])).contains("exceeds i64::MAX"));
    });
}

#[test]
fn messages_quote_a_bounded_escaped_prefix() {
    isolated("messages_quote_a_bounded_escaped_prefix", || {
        bounded("bounded messages", || {
            let message = error("\u{1b}[31m\n:1".parse::<Layout>());
            assert_eq!(
                message,
                "malformed Layout \"\\u{1b}[31m\\n:1\": expected an integer, '(' or '[' at position 0, found '\\u{1b}'"
            );
            assert!(!message.chars().any(char::is_control), "{message}");
            // Escaping counts against the limit: a run of control characters stays short.
            let message = error(format!(" {}5", "\u{1d}".repeat(1000)).parse::<Layout>());
            assert!(message.chars().count() < 200, "{message}");
            assert!(message.contains("… (1002 characters)"), "{message}");
            let long = "7,".repeat(100_000) + "\0";
            let message = error(format!("({long}):1").parse::<Layout>());
            let quoted: String = format!("({long}").chars().take(QUOTE_LIMIT).collect();
            assert!(
                message.starts_with(&format!(
                    "malformed Layout \"{quoted}\"… (200005 characters)"
                )),
                "{message}"
            );
            assert!(message.ends_with("found '\\0'"), "{message}");
            assert!(message.chars().count() < 300, "{message}");
            // A layout of 100,000 extent-1 leaves is quoted by a prefix.
            let wide = Layout::from_flat(&vec![1; 100_000], &vec![0; 100_000]).unwrap();
            for message in [
                error(wide.index_of_leaves(&[0])),
                error(wide.index_of(1)),
                error(wide.mode(100_000)),
                error(wide.slice(&[])),
                error(wide.permute(&[0])),
                error(wide.reshape(&Shape::new(2).unwrap())),
                error(Layout::from_flat(&vec![1; 100_000], &[1])),
                error(wide.squeeze(100_000)),
                error(wide.index(&IntTuple::unit())),
            ] {
                assert!(message.chars().count() < 400, "{message}");
                assert!(message.contains("…"), "{message}");
            }
        });
    });
}

// ---------------------------------------------------------------------------------------
// Fuzzing with proptest: random text and random layouts through every entry point.

/// The proptest runner of a fuzz test: deterministic, `cases` cases (or `PROPTEST_CASES`).
fn runner(cases: u32) -> TestRunner {
    let config = Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Text close to the notation: brackets, digits, separators, spaces, huge numbers, control
/// and non-ASCII characters, and deeply nested (possibly unbalanced) brackets.
fn hostile_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        8 => prop::sample::select(vec![
            "(", ")", "[", "]", ",", ":", " ", "0", "1", "2", "7", "4096",
        ])
        .prop_map(str::to_string),
        1 => prop::sample::select(vec![
            "9223372036854775807", "9223372036854775808", "18446744073709551615",
            "4611686018427387904", "\u{0}", "\u{1b}", "\n", "é", "\u{202e}", "-1", "+2", "()",
        ])
        .prop_map(str::to_string),
        1 => any::<char>().prop_map(|c| c.to_string()),
    ];
    let flat = prop::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat());
    let deep = (
        0usize..100_001,
        any::<bool>(),
        any::<bool>(),
        "[0-9,:()]{0,8}",
    )
        .prop_map(|(depth, close, square, middle)| {
            let (open, shut) = if square { ("[", "]") } else { ("(", ")") };
            let mut text = open.repeat(depth) + &middle;
            if close {
                text += &shut.repeat(depth);
            }
            text
        });
    prop_oneof![4 => flat, 1 => deep]
}

#[test]
fn fuzz_parser_never_panics_or_hangs() {
    isolated("fuzz_parser_never_panics_or_hangs", || {
        runner(192)
            .run(&(hostile_text(), hostile_text()), |(a, b)| {
                bounded("parse", move || {
                    for text in [a.clone(), format!("{a}:{b}"), format!("{a}:{a}")] {
                        if let Ok(layout) = text.parse::<Layout>() {
                            assert_eq!(layout.to_string().parse::<Layout>(), Ok(layout.clone()));
                            let _ = layout.modes();
                            let _ = layout.try_is_injective();
                        } else if let Err(e) = text.parse::<Layout>() {
                            assert!(e.message().chars().count() < 400, "{e}");
                            assert!(!e.message().chars().any(char::is_control), "{e}");
                        }
                        if let Ok(shape) = text.parse::<Shape>() {
                            assert_eq!(shape.to_string().parse::<Shape>(), Ok(shape.clone()));
                        }
                        let _ = text.parse::<Stride>();
                    }
                });
                Ok(())
            })
            .unwrap();
    });
}

/// An extent or stride: small, a power of two up to 2^62, or anything up to 2^62.
fn hostile_value(small: std::ops::Range<usize>) -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => small,
        2 => (0u32..63).prop_map(|k| 1usize << k),
        1 => 0usize..(1 << 62),
        1 => Just(i64::MAX as usize),
    ]
}

/// Builds the layout of `leaves` grouped by `cuts` and wrapped in `wrap` extra levels,
/// dropping trailing leaves until the size and cosize fit; the result may still fail (on the
/// nesting limit), which is part of the test.
fn hostile_layout_from(
    leaves: &[(usize, usize)],
    cuts: &[bool],
    wrap: usize,
) -> Result<Layout, LayoutError> {
    let mut leaves = leaves.to_vec();
    loop {
        let mut extents = Vec::new();
        let mut strides = Vec::new();
        let mut i = 0;
        while i < leaves.len() {
            if cuts.get(i).copied().unwrap_or(false) && i + 1 < leaves.len() {
                extents.push(IntTuple::from(vec![leaves[i].0, leaves[i + 1].0]));
                strides.push(IntTuple::from(vec![leaves[i].1, leaves[i + 1].1]));
                i += 2;
            } else {
                extents.push(IntTuple::from(leaves[i].0));
                strides.push(IntTuple::from(leaves[i].1));
                i += 1;
            }
        }
        let (mut extents, mut strides) = (IntTuple::Tuple(extents), IntTuple::Tuple(strides));
        for _ in 0..wrap {
            extents = IntTuple::Tuple(vec![extents]);
            strides = IntTuple::Tuple(vec![strides]);
        }
        let built = Shape::new(extents).and_then(|shape| Layout::new(shape, Stride::new(strides)?));
        match built {
            Err(e) if !leaves.is_empty() && !e.message().contains("MAX_NESTING") => {
                leaves.pop();
            }
            other => return other,
        }
    }
}

fn hostile_layout() -> impl Strategy<Value = Result<Layout, LayoutError>> {
    (
        prop::collection::vec((hostile_value(1..7), hostile_value(0..13)), 0..8),
        prop::collection::vec(any::<bool>(), 8),
        prop_oneof![8 => Just(0usize), 1 => 0usize..(MAX_NESTING + 4)],
    )
        .prop_map(|(leaves, cuts, wrap)| hostile_layout_from(&leaves, &cuts, wrap))
}

/// A coordinate: integers (some beyond `i64`), tuples, nested tuples.
fn hostile_coord() -> impl Strategy<Value = IntTuple> {
    let leaf = prop_oneof![
        4 => (0i64..8).prop_map(IntTuple::Int),
        1 => any::<i64>().prop_map(IntTuple::Int),
        1 => any::<u64>().prop_map(IntTuple::from),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(IntTuple::Tuple)
    })
}

fn hostile_tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![Just(TreeNode::Leaf), (0usize..6).prop_map(TreeNode::Id)];
    let node = leaf.prop_recursive(3, 12, 3, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(|items| TreeNode::Tree(Tree::new(items)))
    });
    prop::collection::vec(node, 0..5).prop_map(Tree::new)
}

fn hostile_key() -> impl Strategy<Value = SliceKey> {
    let bound = prop_oneof![
        3 => (-4i64..8).prop_map(Some),
        1 => Just(None),
        1 => any::<i64>().prop_map(Some),
    ];
    prop_oneof![
        2 => prop_oneof![3 => 0i64..8, 1 => any::<i64>()].prop_map(SliceKey::Index),
        3 => (bound.clone(), bound.clone(), bound).prop_map(|(start, stop, step)| SliceKey::Range {
            start,
            stop,
            step
        }),
    ]
}

/// Everything a case feeds the algebra beside its two layouts.
#[derive(Debug, Clone)]
struct Extras {
    cotargets: Vec<usize>,
    ordinals: Vec<usize>,
    coords: Vec<IntTuple>,
    keys: Vec<SliceKey>,
    dims: Vec<usize>,
    order: Vec<usize>,
    dim: i64,
    output: Tree,
    selection: Tree,
}

fn extras() -> impl Strategy<Value = Extras> {
    (
        prop::collection::vec(hostile_value(1..64), 1..4),
        prop::collection::vec(hostile_value(0..64), 1..4),
        prop::collection::vec(hostile_coord(), 1..4),
        prop::collection::vec(hostile_key(), 0..6),
        prop::collection::vec(0usize..8, 0..5),
        prop::collection::vec(0usize..6, 0..6),
        -8i64..8,
        hostile_tree(),
        hostile_tree(),
    )
        .prop_map(
            |(cotargets, ordinals, coords, keys, dims, order, dim, output, selection)| Extras {
                cotargets,
                ordinals,
                coords,
                keys,
                dims,
                order,
                dim,
                output,
                selection,
            },
        )
}

/// Calls every algebra and view entry point on `a` (with `b` as the other operand) and
/// checks a few cheap post-conditions of what succeeds.
fn exercise(a: &Layout, b: &Layout, x: &Extras) {
    // Notation, structure, evaluation.
    assert_eq!(a.to_string().parse::<Layout>().as_ref(), Ok(a));
    let _ = format!("{a:?} {:?} {:?} {}", a.shape(), a.stride(), a.profile());
    let modes = a.modes();
    assert_eq!(modes.len(), a.rank());
    assert_eq!(Layout::from_modes(&modes).map(|l| l.size()), Ok(a.size()));
    for k in 0..a.rank() + 1 {
        let _ = a.mode(k);
        let _ = a.shape().mode(k);
    }
    let _ = (
        a.size(),
        a.cosize(),
        a.depth(),
        a.is_column_major(),
        a.profile().leaf_count(),
    );
    let coalesced = a.coalesce();
    assert_eq!(coalesced.size(), a.size());
    let _ = a.filter();
    for &ordinal in &x.ordinals {
        let direct = a.index_of(ordinal);
        assert_eq!(direct.is_ok(), ordinal < a.size());
        if let Ok(index) = direct {
            assert!(index < a.cosize());
            assert_eq!(coalesced.index_of(ordinal), Ok(index));
            let coord = a.shape().decode(ordinal).unwrap();
            assert_eq!(a.index(&coord), Ok(index));
            assert_eq!(a.shape().encode(&coord), Ok(ordinal));
        }
        assert_eq!(IndexMap::apply(a, ordinal), direct);
        let _ = a.shape().decode(ordinal);
    }
    for coord in &x.coords {
        let _ = a.index(coord);
        let _ = a.shape().encode(coord);
    }
    let _ = a.index_of_leaves(&x.ordinals);
    let leaf_coords: Vec<usize> = a.leaf_pairs().map(|(e, _)| e - 1).collect();
    assert!(a.index_of_leaves(&leaf_coords).is_ok());
    assert_eq!(a.indices().take(64).count(), a.size().min(64));
    for (i, index) in a.indices().take(8).enumerate() {
        assert_eq!(a.index_of(i), Ok(index));
    }
    // Injectivity.
    let injective = a.try_is_injective();
    assert_eq!(a.is_injective(), injective == Ok(true));
    assert_eq!(IndexMap::injectivity(a), injective.as_ref().ok().copied());
    if a.size() <= 4096 {
        let mut all: Vec<usize> = a.indices().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(injective, Ok(all.len() == a.size()), "{a}");
    }
    let _ = a.uniform_preimage_extent(b.shape());
    // Composition.
    if let Ok(composed) = a.compose(b) {
        assert_eq!(composed.size(), b.size());
        for i in 0..b.size().min(4) {
            assert_eq!(composed.apply(i), a.index_of(b.index_of(i).unwrap()));
        }
        let _ = composed.injectivity();
        let _ = format!("{composed} {composed:?}");
        let _ = composed.compose(&composed);
        let _ = Composition::from(a.clone()).compose(&composed);
        let _ = composed.clone().into_layout();
    }
    let _ = a.compose_shape(b.shape());
    let _ = a.compose_tiler(&b.modes());
    // Complement, division, products, inverses.
    for &cotarget in x.cotargets.iter().chain([a.cosize(), 0, 1 << 62].iter()) {
        let _ = a.complement(cotarget);
    }
    let _ = a.divide(b);
    let _ = a.divide_tiler(&b.modes());
    let _ = a.zipped_divide(&b.modes());
    let _ = a.logical_product(b);
    let _ = a.blocked_product(b);
    let right = a.right_inverse();
    for i in 0..right.size().min(8) {
        assert_eq!(a.index_of(right.index_of(i).unwrap()), Ok(i));
    }
    if let Ok(left) = a.left_inverse() {
        for i in 0..a.size().min(8) {
            assert_eq!(left.index_of(a.index_of(i).unwrap()), Ok(i));
        }
    }
    // Views.
    let _ = a.slice(&x.keys);
    let keys: Vec<SliceKey> = x.keys.iter().copied().cycle().take(a.rank()).collect();
    if let Ok((offset, view)) = a.slice(&keys) {
        assert!(offset + view.cosize() <= a.cosize());
    }
    let _ = a.reshape(b.shape());
    let _ = a.as_strided(b);
    let _ = a.broadcast_in_dim(b.shape(), &x.dims);
    let _ = a.broadcast_to(b.shape());
    let _ = a.unsqueeze(x.dim);
    let _ = a.squeeze(x.dim);
    let _ = a.permute(&x.order);
    let _ = a.concat(b);
    let _ = a.append(b);
    let _ = a.rearrange(&x.output, Some(&x.selection));
    let _ = a.rearrange(&x.output, None);
    let _ = Layout::with_leaf_strides(a.shape().clone(), &x.ordinals);
    let _ = a.shape().with_leaves(&x.cotargets);
    let _ = Layout::from_flat(&x.cotargets, &x.ordinals);
}

#[test]
fn fuzz_algebra_and_views_never_panic_or_hang() {
    isolated("fuzz_algebra_and_views_never_panic_or_hang", || {
        runner(256)
            .run(
                &(hostile_layout(), hostile_layout(), extras()),
                |(a, b, x)| {
                    let (a, b) = match (a, b) {
                        (Ok(a), Ok(b)) => (a, b),
                        (Err(e), _) | (_, Err(e)) => {
                            // Only the nesting limit may refuse a generated layout.
                            assert!(e.message().contains("MAX_NESTING"), "{e}");
                            return Ok(());
                        }
                    };
                    bounded("algebra", move || {
                        exercise(&a, &b, &x);
                        exercise(&b, &a, &x);
                    });
                    Ok(())
                },
            )
            .unwrap();
    });
}

/// A spine `depth` levels deep with `width` extent-1 siblings at every level.
fn spine(depth: usize, width: usize) -> IntTuple {
    let mut tree = IntTuple::Int(3);
    for _ in 0..depth {
        let mut items = vec![tree];
        items.extend((0..width).map(|_| IntTuple::Int(1)));
        tree = IntTuple::Tuple(items);
    }
    tree
}

#[test]
fn fuzz_deep_written_trees_never_overflow() {
    isolated("fuzz_deep_written_trees_never_overflow", || {
        runner(32)
            .run(&(0usize..100_001, 0usize..4), |(depth, width)| {
                bounded("deep written trees", move || {
                    let tree = spine(depth, width);
                    let fits = tree.depth() <= MAX_NESTING;
                    assert_eq!(tree.depth(), depth.max(1));
                    let layout: Layout = "(3,2):(1,3)".parse().unwrap();
                    let _ = layout.index(&tree);
                    let _ = layout.shape().encode(&tree);
                    let text = tree.to_string();
                    drop_deep(tree);
                    assert_eq!(text.parse::<Shape>().is_ok(), fits, "{depth}");
                    assert_eq!(format!("{text}:{text}").parse::<Layout>().is_ok(), fits);
                    assert_eq!(Shape::new(spine(depth, width)).is_ok(), fits);
                    assert_eq!(Stride::new(spine(depth, width)).is_ok(), fits);
                });
                Ok(())
            })
            .unwrap();
    });
}
