//! [`ScatterReduction`]: how `TiledEvictable::scatter` combines the compact values with the
//! template's tiles.

use std::fmt;
use std::str::FromStr;

use strideweave_core::error::{Error, Result};

/// How [`TiledEvictable::scatter`](crate::TiledEvictable::scatter) fills each
/// selected tile (docs/tiers.md, project and scatter).
///
/// ```
/// use strideweave::carriers::ScatterReduction;
/// assert_eq!("add".parse::<ScatterReduction>()?, ScatterReduction::Add);
/// assert_eq!(ScatterReduction::default(), ScatterReduction::Replace);
/// assert!("max".parse::<ScatterReduction>().is_err()); // a Value error naming "max"
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ScatterReduction {
    /// The selected tiles take the compact's values; the template's are not read.
    #[default]
    Replace,
    /// The selected tiles take the template's values plus the compact's; every selected
    /// template tile must be valid.
    Add,
}

impl ScatterReduction {
    /// The name it parses from: `replace` or `add`.
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduction::Replace => "replace",
            ScatterReduction::Add => "add",
        }
    }
}

impl fmt::Display for ScatterReduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ScatterReduction {
    type Err = Error;

    /// `replace` or `add`; anything else is a Value error naming the string.
    fn from_str(name: &str) -> Result<ScatterReduction> {
        match name {
            "replace" => Ok(ScatterReduction::Replace),
            "add" => Ok(ScatterReduction::Add),
            other => Err(Error::Value(format!(
                "scatter reduction must be \"replace\" or \"add\", got {other:?}"
            ))),
        }
    }
}
