//! [`Budget`]: what tiled work may hold on the primary tier's class under a policy's
//! [`primary_capacity`](crate::ResidencyPolicy::primary_capacity), counted in
//! **slots**; and the registry of the live TiledEvictable carriers steered by one policy
//! object, whose resident tiles and kept staging buffers all count against its capacity.
//!
//! The capacity is given in tiles. One tile of it is the largest tile (in slots) among the
//! live carriers sharing the policy, so a policy over carriers of one tile shape (a parameter
//! and the gradients its factory makes) bounds the primary tier at exactly `capacity` such
//! tiles, and every carrier held there counts by its size: a transient twice a tile's size
//! counts as two tiles, a staged piece of a quarter tile as a quarter.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::tile_table::TileTable;
use crate::ResidencyPolicy;

/// One live carrier's table and the policy object it was built with.
struct Shared {
    policy: Weak<dyn ResidencyPolicy>,
    table: Weak<TileTable>,
}

/// Every TiledEvictable table built with a policy (entries of dropped tables are pruned as
/// new ones arrive).
static SHARING: Mutex<Vec<Shared>> = Mutex::new(Vec::new());

/// Records the new `table` under its policy object (nothing without a policy).
pub(crate) fn register(table: &Arc<TileTable>) {
    let Some(policy) = table.policy() else {
        return;
    };
    let mut shared = SHARING.lock();
    shared.retain(|entry| entry.table.strong_count() > 0);
    shared.push(Shared {
        policy: Arc::downgrade(policy),
        table: Arc::downgrade(table),
    });
}

/// The live tables built with the policy object `policy`.
fn sharing(policy: &Arc<dyn ResidencyPolicy>) -> Vec<Arc<TileTable>> {
    let target = Arc::as_ptr(policy).cast::<()>();
    let shared = SHARING.lock();
    shared
        .iter()
        .filter(|entry| entry.policy.as_ptr().cast::<()>() == target)
        .filter_map(|entry| entry.table.upgrade())
        .collect()
}

/// The primary capacity one policy object gives, in slots, and what is already held under
/// it outside the work being planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// `primary_capacity × unit`.
    pub(crate) capacity: usize,
    /// The slots on the primary tier of every live carrier sharing the policy (its primary
    /// tiles), and the staging buffers kept by those that are not operands of the work.
    pub(crate) resident: usize,
    /// The slots of one tile of the capacity: the largest tile of those carriers.
    pub(crate) unit: usize,
}

impl Budget {
    /// The budget of the policy of `table`, `None` when it does not bound the primary tier.
    /// `operands` are the tables of the work being planned: their kept staging buffers are
    /// the work's own to reuse (it counts them as it takes them), not resident.
    pub(crate) fn of(table: &TileTable, operands: &[&Arc<TileTable>]) -> Option<Budget> {
        let policy = table.policy()?;
        let capacity = policy.primary_capacity()?;
        let mut tables = sharing(policy);
        for operand in operands {
            let shares = operand
                .policy()
                .is_some_and(|other| Arc::ptr_eq(other, policy));
            if shares && !tables.iter().any(|t| Arc::ptr_eq(t, operand)) {
                tables.push(Arc::clone(operand));
            }
        }
        let unit = tables
            .iter()
            .map(|t| t.grid().tile_size())
            .chain([table.grid().tile_size()])
            .max()
            .unwrap_or(1)
            .max(1);
        let resident = tables
            .iter()
            .map(|t| {
                let own = operands.iter().any(|o| Arc::ptr_eq(o, t));
                t.primary_slots() + if own { 0 } else { t.kept_slots() }
            })
            .sum();
        Some(Budget {
            capacity: capacity.saturating_mul(unit),
            resident,
            unit,
        })
    }

    /// The slots left once `held` more are held.
    pub(crate) fn free(&self, held: usize) -> usize {
        self.capacity
            .saturating_sub(self.resident.saturating_add(held))
    }

    /// How many tiles `table` (one of the carriers sharing the policy) may have on the
    /// primary tier: what the capacity leaves beside everything the others hold there, in
    /// tiles of `table`'s size.
    pub(crate) fn tiles_for(table: &Arc<TileTable>) -> Option<usize> {
        let budget = Budget::of(table, &[table])?;
        let others = budget.resident.saturating_sub(table.primary_slots());
        Some(budget.capacity.saturating_sub(others) / table.grid().tile_size().max(1))
    }
}
