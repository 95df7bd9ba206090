//! Framework-owned lifecycle state of a carrier: release, ownership and claims.
//!
//! A carrier is *released* once and for all; it may be *owned* by another carrier (an
//! Evictable owns its tiers), which makes it readable but not writable except inside the
//! owner's thread-bound access scope; and it may be *claimed* by a pending asynchronous move,
//! which refuses mutation, release and further moves until the move is terminal.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::{self, ThreadId};

use crate::carrier::Carrier;
use crate::error::{Error, Result};

const RELEASED: u8 = 1;
const OWNED: u8 = 2;
const CLAIMED: u8 = 4;

/// The lifecycle flags and the owner's access scope.
#[derive(Default)]
pub(crate) struct Lifecycle {
    flags: AtomicU8,
    /// The thread inside the owner's access scope, and how deeply it has entered it.
    owner_access: Mutex<Option<(ThreadId, usize)>>,
}

impl Lifecycle {
    pub(crate) fn is_released(&self) -> bool {
        self.flags.load(Ordering::Acquire) & RELEASED != 0
    }

    pub(crate) fn is_owned(&self) -> bool {
        self.flags.load(Ordering::Acquire) & OWNED != 0
    }

    pub(crate) fn is_claimed(&self) -> bool {
        self.flags.load(Ordering::Acquire) & CLAIMED != 0
    }

    /// Whether this thread is inside the owner's access scope.
    pub(crate) fn owner_access_here(&self) -> bool {
        let access = self
            .owner_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        matches!(*access, Some((thread, _)) if thread == thread::current().id())
    }

    /// Sets `flag` if none of `forbidden` is set; returns the flags seen when it failed.
    fn set_unless(&self, flag: u8, forbidden: u8) -> std::result::Result<(), u8> {
        self.flags
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |flags| {
                (flags & forbidden == 0).then_some(flags | flag)
            })
            .map(|_| ())
    }

    fn clear(&self, flag: u8) {
        self.flags.fetch_and(!flag, Ordering::AcqRel);
    }

    /// Marks the carrier released; false when it already was.
    pub(crate) fn mark_released(&self) -> bool {
        self.set_unless(RELEASED, RELEASED).is_ok()
    }

    /// Undoes [`mark_released`](Self::mark_released) after the storage refused to release,
    /// so the carrier stays live and a later release calls the storage again.
    pub(crate) fn unmark_released(&self) {
        self.clear(RELEASED);
    }
}

/// Proof that one carrier owns another (the seed's ownership token).
///
/// While it lives, the owned carrier is readable by anyone but writable only inside an
/// [`OwnerAccess`] scope opened from this token on the current thread. Dropping the token
/// relinquishes ownership without releasing the carrier.
#[derive(Debug)]
pub struct OwnershipToken {
    carrier: Carrier,
}

impl OwnershipToken {
    /// Takes ownership of `carrier`; fails when it is released, claimed or already owned.
    pub(crate) fn claim(carrier: &Carrier) -> Result<OwnershipToken> {
        let lifecycle = carrier.lifecycle();
        match lifecycle.set_unless(OWNED, RELEASED | OWNED | CLAIMED) {
            Ok(()) => Ok(OwnershipToken {
                carrier: carrier.clone(),
            }),
            Err(flags) => Err(Error::Runtime(format!(
                "cannot take ownership of {} carrier: it is {}",
                carrier.class(),
                describe(flags)
            ))),
        }
    }

    /// The owned carrier.
    pub fn carrier(&self) -> &Carrier {
        &self.carrier
    }

    /// Enters the owner's access scope on this thread (reentrant). Fails when another
    /// thread is inside the scope.
    pub fn access(&self) -> Result<OwnerAccess<'_>> {
        let here = thread::current().id();
        let mut access = self
            .carrier
            .lifecycle()
            .owner_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match *access {
            None => *access = Some((here, 1)),
            Some((thread, ref mut depth)) if thread == here => *depth += 1,
            Some(_) => {
                return Err(Error::Runtime(format!(
                    "owner access to {} carrier is held by another thread",
                    self.carrier.class()
                )))
            }
        }
        Ok(OwnerAccess { token: self })
    }
}

impl OwnershipToken {
    /// Gives up ownership of the carrier once it is released, although the token lives on
    /// (a released tier of a released TiledEvictable is no longer owned). A live carrier
    /// stays owned: only dropping the token gives that up. Idempotent.
    pub(crate) fn relinquish_released(&self) {
        if self.carrier.is_released() {
            self.give_up();
        }
    }

    fn give_up(&self) {
        let lifecycle = self.carrier.lifecycle();
        *lifecycle
            .owner_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        lifecycle.clear(OWNED);
    }
}

impl Drop for OwnershipToken {
    fn drop(&mut self) {
        self.give_up();
    }
}

/// The owner's access scope on one thread: the owned carrier is writable here until the
/// guard drops.
#[derive(Debug)]
pub struct OwnerAccess<'a> {
    token: &'a OwnershipToken,
}

impl Drop for OwnerAccess<'_> {
    fn drop(&mut self) {
        let mut access = self
            .token
            .carrier
            .lifecycle()
            .owner_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, depth)) = access.as_mut() {
            *depth -= 1;
            if *depth == 0 {
                *access = None;
            }
        }
    }
}

/// A pending operation's hold on a carrier (an asynchronous move claims its source and
/// destination): mutation, release and moves are refused until it drops.
#[derive(Debug)]
pub(crate) struct Claim {
    carrier: Carrier,
}

impl Claim {
    /// Claims `carrier`; fails when it is released or already claimed.
    pub(crate) fn new(carrier: &Carrier) -> Result<Claim> {
        match carrier.lifecycle().set_unless(CLAIMED, RELEASED | CLAIMED) {
            Ok(()) => Ok(Claim {
                carrier: carrier.clone(),
            }),
            Err(flags) => Err(Error::Runtime(format!(
                "cannot claim {} carrier: it is {}",
                carrier.class(),
                describe(flags)
            ))),
        }
    }
}

impl Claim {
    /// Releases the claimed carrier while the claim still holds it (the commit of a move).
    pub(crate) fn release_carrier(self) -> Result<()> {
        self.carrier.release_claimed()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.carrier.lifecycle().clear(CLAIMED);
    }
}

fn describe(flags: u8) -> &'static str {
    if flags & RELEASED != 0 {
        "released"
    } else if flags & CLAIMED != 0 {
        "claimed by a pending move"
    } else {
        "owned by another carrier"
    }
}
