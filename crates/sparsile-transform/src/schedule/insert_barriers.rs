//! Automatic barrier placement: where threads of a block communicate through a `shared`
//! buffer inside one statement list, puts the fewest barriers that order every write
//! before the reads and writes that follow it, and every read before the writes that
//! follow it.
//!
//! Purpose: a primitive that stages data in shared memory (`cache_shared`) writes the
//! buffer cooperatively — each thread a different element — and then every thread reads
//! elements other threads wrote. Without a barrier between the two a thread may read an
//! element before its writer ran (read after write); in a loop, a fast thread may
//! overwrite an element of the next chunk while a slow one still reads the previous
//! chunk (write after read). This pass finds both from the statements' accesses.
//!
//! Preconditions: every thread that shares the buffer runs the statement list the same
//! number of times and in the same order (the caller checks this uniformity: a barrier
//! under a condition that differs between the threads hangs or is undefined); `scope` is
//! wide enough for the threads that share the buffer (`sync_warp` for the lanes of one
//! warp, `sync_threads` for the block).
//!
//! Rules, over the statements of the list in order, with the accesses of each statement
//! counted at any depth: a barrier goes before a statement that reads the buffer after an
//! unordered write, or writes it after an unordered read or write; a barrier orders
//! everything before it. All shared buffers of the list are placed together (the
//! barriers already there are placed again), so that staging two buffers side by side
//! shares its barriers. With `carried` (the list is a loop body run again), the
//! accesses of the whole body are also unordered at its start, as the previous
//! iteration left them.
//!
//! Example (a chunk loop staging `A` for a warp):
//! ```text
//! for c in 0..n {                          for c in 0..n {
//!   A_shared[..] = A[..]                      sync_warp
//!   for t in 0..32 { .. A_shared[t] .. }  →   A_shared[..] = A[..]
//! }                                           sync_warp
//!                                             for t in 0..32 { .. A_shared[t] .. }
//!                                           }
//! ```

use std::collections::HashSet;

use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{BarrierScope, Stmt};
use sparsile_ir::Span;

/// `stmts` with barriers where accesses of `buffers` need ordering (see the module
/// docs). Barriers already in the list (at its top level) are taken out first and placed
/// again for all of `buffers` together, with the widest scope among them and `scope`.
pub(crate) fn insert_barriers(
    stmts: Vec<Stmt>,
    buffers: &HashSet<BufferId>,
    scope: BarrierScope,
    carried: bool,
) -> Vec<Stmt> {
    let mut scope = scope;
    let stmts: Vec<Stmt> = stmts
        .into_iter()
        .filter(|s| match s {
            Stmt::Barrier { scope: old, .. } => {
                if *old == BarrierScope::Block {
                    scope = BarrierScope::Block;
                }
                false
            }
            _ => true,
        })
        .collect();
    let touches = |s: &Stmt| {
        let one = std::slice::from_ref(s);
        let reads: HashSet<BufferId> = Stmt::loaded_buffers(one)
            .intersection(buffers)
            .copied()
            .collect();
        let writes: HashSet<BufferId> = Stmt::stored_buffers(one)
            .intersection(buffers)
            .copied()
            .collect();
        (reads, writes)
    };
    let mut pending_read: HashSet<BufferId> = HashSet::new();
    let mut pending_write: HashSet<BufferId> = HashSet::new();
    if carried {
        for s in &stmts {
            let (r, w) = touches(s);
            pending_read.extend(r);
            pending_write.extend(w);
        }
    }
    let mut out = Vec::with_capacity(stmts.len() + 2);
    for s in stmts {
        let (reads, writes) = touches(&s);
        let raw = reads.iter().any(|b| pending_write.contains(b));
        let war = writes
            .iter()
            .any(|b| pending_read.contains(b) || pending_write.contains(b));
        if raw || war {
            out.push(Stmt::Barrier {
                scope,
                span: Span::default(),
            });
            pending_read.clear();
            pending_write.clear();
        }
        pending_read.extend(reads);
        pending_write.extend(writes);
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparsile_ir::loops::Expr;

    fn store(b: u32) -> Stmt {
        Stmt::Store {
            buffer: BufferId(b),
            indices: vec![Expr::Int(0)],
            value: Expr::Float(1.0),
            span: Span::default(),
        }
    }

    fn read(b: u32, into: u32) -> Stmt {
        Stmt::Store {
            buffer: BufferId(into),
            indices: vec![Expr::Int(0)],
            value: Expr::load(BufferId(b), vec![Expr::Int(0)]),
            span: Span::default(),
        }
    }

    fn shape(stmts: &[Stmt]) -> String {
        stmts
            .iter()
            .map(|s| match s {
                Stmt::Barrier { .. } => "|".to_string(),
                s if Stmt::stored_buffers(std::slice::from_ref(s)).contains(&BufferId(0)) => {
                    "w".to_string()
                }
                s if Stmt::loaded_buffers(std::slice::from_ref(s)).contains(&BufferId(0)) => {
                    "r".to_string()
                }
                _ => ".".to_string(),
            })
            .collect()
    }

    #[test]
    fn a_write_then_reads_get_one_barrier_between() {
        let out = insert_barriers(
            vec![store(0), read(0, 1), read(0, 1), store(1)],
            &HashSet::from([BufferId(0)]),
            BarrierScope::Warp,
            false,
        );
        assert_eq!(shape(&out), "w|rr.");
    }

    #[test]
    fn a_loop_body_is_ordered_against_its_previous_iteration() {
        let body = vec![store(0), read(0, 1)];
        let out = insert_barriers(
            body,
            &HashSet::from([BufferId(0)]),
            BarrierScope::Block,
            true,
        );
        assert_eq!(shape(&out), "|w|r");
        assert!(matches!(
            out[0],
            Stmt::Barrier {
                scope: BarrierScope::Block,
                ..
            }
        ));
    }

    #[test]
    fn other_buffers_and_reads_alone_need_no_barrier() {
        let out = insert_barriers(
            vec![read(0, 1), read(0, 1), store(1)],
            &HashSet::from([BufferId(0)]),
            BarrierScope::Warp,
            true,
        );
        assert_eq!(shape(&out), "rr.");
    }

    #[test]
    fn two_staged_buffers_share_their_barriers() {
        let out = insert_barriers(
            vec![
                store(2),
                Stmt::Barrier {
                    scope: BarrierScope::Warp,
                    span: Span::default(),
                },
                store(0),
                read(0, 1),
                read(2, 1),
            ],
            &HashSet::from([BufferId(0), BufferId(2)]),
            BarrierScope::Warp,
            true,
        );
        assert_eq!(shape(&out), "|.w|r.");
    }

    #[test]
    fn a_write_after_reads_waits_for_them() {
        let out = insert_barriers(
            vec![read(0, 1), store(0)],
            &HashSet::from([BufferId(0)]),
            BarrierScope::Warp,
            false,
        );
        assert_eq!(shape(&out), "r|w");
    }
}
