//! [`ReductionRule`]: when a Gpu reduction runs one invocation per result instead of as a
//! parallel tree.

use strideweave::{Error, Result};

use crate::kernels::{LOOP_BOUND, TREE_FROM};

/// When `reduce_sum` and `reduce_max` of `n` results over a mode of `m` elements run one
/// invocation per result (a plain ascending loop over the mode) rather than as a parallel
/// tree (docs/gpu-carrier.md, "Reductions"): always for a mode shorter than 64 elements, and
/// otherwise when there are at least [`serial_rows`](Self::serial_rows) results and the mode
/// is shorter than [`serial_longest`](Self::serial_longest) elements.
///
/// The two figures depend on the device: a loop per result keeps a device busy only when
/// there are enough results for its lanes, while a tree pays a barrier per step. A GPU has
/// thousands of lanes; a CPU-side Vulkan device (Mesa's llvmpipe) has a few SIMD lanes per
/// core, where a loop per result over a column-major mode is the strided loop it runs best and
/// a workgroup's 256 invocations pay for each of the tree's eight barriers on one thread.
/// [`GpuDevice::open`](crate::GpuDevice::open) picks [`for_cpu_device`](Self::for_cpu_device)
/// for an adapter of type `Cpu` and [`for_gpu`](Self::for_gpu) otherwise;
/// [`GpuDevice::set_reduction_rule`](crate::GpuDevice::set_reduction_rule) changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReductionRule {
    serial_rows: usize,
    serial_longest: usize,
}

impl ReductionRule {
    /// A rule running one invocation per result from `serial_rows` results on, for modes
    /// shorter than `serial_longest` elements.
    ///
    /// # Errors
    /// Value when `serial_longest` exceeds 65535: a loop per result must stay within the
    /// iteration bound llvmpipe enforces on a shader invocation (a longer mode always runs as
    /// a tree).
    pub fn new(serial_rows: usize, serial_longest: usize) -> Result<ReductionRule> {
        if serial_longest > LOOP_BOUND {
            return Err(Error::Value(format!(
                "a reduction rule looping over modes of up to {serial_longest} elements per \
                 result: at most {LOOP_BOUND} fit one invocation's loop"
            )));
        }
        Ok(ReductionRule {
            serial_rows,
            serial_longest,
        })
    }

    /// The rule for a GPU: one invocation per result only when the results alone fill the
    /// device (65 536 or more) and the mode is shorter than 4096 elements.
    pub fn for_gpu() -> ReductionRule {
        ReductionRule {
            serial_rows: 65536,
            serial_longest: 4096,
        }
    }

    /// The rule for a CPU-side Vulkan device such as llvmpipe: one invocation per result for
    /// every count of results over modes of up to 16 384 elements, the longest measured.
    /// On llvmpipe the loop per result was faster at every shape measured, from 16 results
    /// over 16 384 elements (3.4×) and 64 over 4096 (2.6×) to 1024 over 1024 (5.3×) and
    /// 4096 over 1024 (4.1×) (docs/gpu-carrier.md, "Reductions", with the run's load).
    pub fn for_cpu_device() -> ReductionRule {
        ReductionRule {
            serial_rows: 1,
            serial_longest: 16385,
        }
    }

    /// The fewest results that run one invocation each.
    pub fn serial_rows(&self) -> usize {
        self.serial_rows
    }

    /// The shortest mode that always runs as a tree once it is at least 64 elements long.
    pub fn serial_longest(&self) -> usize {
        self.serial_longest
    }

    /// Whether `n` results over a mode of `m` elements reduce as a tree.
    pub fn reduces_in_tree(&self, n: usize, m: usize) -> bool {
        m >= TREE_FROM && (n < self.serial_rows || m >= self.serial_longest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_switches_at_its_bounds() -> Result<()> {
        let gpu = ReductionRule::for_gpu();
        assert!(!gpu.reduces_in_tree(1, 63));
        assert!(gpu.reduces_in_tree(1, 64));
        assert!(gpu.reduces_in_tree(65535, 64));
        assert!(!gpu.reduces_in_tree(65536, 4095));
        assert!(gpu.reduces_in_tree(65536, 4096));
        let cpu = ReductionRule::for_cpu_device();
        let (rows, longest) = (cpu.serial_rows(), cpu.serial_longest());
        assert!(!cpu.reduces_in_tree(rows, longest - 1));
        assert!(cpu.reduces_in_tree(rows - 1, longest - 1));
        assert!(cpu.reduces_in_tree(rows, longest));
        assert!(!cpu.reduces_in_tree(1, 63));
        let forced = ReductionRule::new(0, LOOP_BOUND)?;
        assert!(!forced.reduces_in_tree(1, LOOP_BOUND - 1));
        Ok(())
    }
}
