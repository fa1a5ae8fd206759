//! Race detection for `parallel` loops run serially.
//!
//! Each running parallel loop (innermost last) records, for the elements of writable
//! buffers touched by its iterations, the iteration that stored each element and up to
//! two iterations that loaded it. Two different iterations conflict when both store
//! the same element, or when one stores an element the other loads (in either order):
//! on a real thread pool their result would depend on scheduling. Atomic adds by
//! different iterations to one element do not conflict with each other, only with plain
//! loads and stores of it by other iterations.
//!
//! ```text
//! for i in 0..3 parallel { y[i % 2] = 1.0 }   // iterations 0 and 2 both store y[0]
//! for i in 0..3 parallel { y[i] = y[2 - i] }  // iteration 0 loads y[2], 2 stores it
//! ```

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use sparsile_ir::{BufferId, VarId};

/// The iterations that loaded an element: the first, and one other if any.
#[derive(Debug, Clone, Copy)]
struct Readers {
    first: i64,
    other: Option<i64>,
}

impl Readers {
    /// A reader other than `iteration`, if any.
    fn besides(self, iteration: i64) -> Option<i64> {
        if self.first != iteration {
            Some(self.first)
        } else {
            self.other
        }
    }
}

#[derive(Debug)]
struct Frame {
    var: VarId,
    iteration: i64,
    writes: HashMap<(BufferId, usize), i64>,
    reads: HashMap<(BufferId, usize), Readers>,
    /// The iterations that added to an element atomically.
    atomics: HashMap<(BufferId, usize), Readers>,
}

/// What conflicted: the loop variable, and the two iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// Iterations `first` and `second` both store the element.
    Write { var: VarId, first: i64, second: i64 },
    /// Iteration `writer` stores the element that iteration `reader` loads.
    ReadWrite {
        var: VarId,
        writer: i64,
        reader: i64,
    },
}

/// The running parallel loops.
#[derive(Debug, Default)]
pub(crate) struct Races {
    frames: Vec<Frame>,
}

impl Races {
    /// The number of running parallel loops.
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    /// The variable and current iteration of the parallel loop at `depth`.
    pub fn frame(&self, depth: usize) -> (VarId, i64) {
        let f = &self.frames[depth];
        (f.var, f.iteration)
    }

    pub fn enter(&mut self, var: VarId) {
        self.frames.push(Frame {
            var,
            iteration: 0,
            writes: HashMap::new(),
            reads: HashMap::new(),
            atomics: HashMap::new(),
        });
    }

    /// Sets the iteration of the innermost parallel loop.
    pub fn set_iteration(&mut self, iteration: i64) {
        self.frames
            .last_mut()
            .expect("set_iteration inside a parallel loop")
            .iteration = iteration;
    }

    pub fn leave(&mut self) {
        self.frames.pop();
    }

    /// Records an atomic add to element `offset` of `buffer`: it conflicts with plain
    /// loads and stores of other iterations, never with other atomic adds.
    pub fn atomic(&mut self, buffer: BufferId, offset: usize) -> Result<(), Conflict> {
        for f in &mut self.frames {
            let key = (buffer, offset);
            if let Some(&first) = f.writes.get(&key).filter(|w| **w != f.iteration) {
                return Err(Conflict::Write {
                    var: f.var,
                    first,
                    second: f.iteration,
                });
            }
            if let Some(reader) = f.reads.get(&key).and_then(|r| r.besides(f.iteration)) {
                return Err(Conflict::ReadWrite {
                    var: f.var,
                    writer: f.iteration,
                    reader,
                });
            }
            record(&mut f.atomics, key, f.iteration);
        }
        Ok(())
    }

    /// Records a store of element `offset` of `buffer`.
    pub fn store(&mut self, buffer: BufferId, offset: usize) -> Result<(), Conflict> {
        for f in &mut self.frames {
            let key = (buffer, offset);
            if let Some(first) = f.atomics.get(&key).and_then(|r| r.besides(f.iteration)) {
                return Err(Conflict::Write {
                    var: f.var,
                    first,
                    second: f.iteration,
                });
            }
            if let Some(reader) = f.reads.get(&key).and_then(|r| r.besides(f.iteration)) {
                return Err(Conflict::ReadWrite {
                    var: f.var,
                    writer: f.iteration,
                    reader,
                });
            }
            match f.writes.entry(key) {
                Entry::Occupied(e) if *e.get() != f.iteration => {
                    return Err(Conflict::Write {
                        var: f.var,
                        first: *e.get(),
                        second: f.iteration,
                    })
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(e) => {
                    e.insert(f.iteration);
                }
            }
        }
        Ok(())
    }

    /// Records a load of element `offset` of `buffer`.
    pub fn load(&mut self, buffer: BufferId, offset: usize) -> Result<(), Conflict> {
        for f in &mut self.frames {
            let key = (buffer, offset);
            if let Some(writer) = f.atomics.get(&key).and_then(|r| r.besides(f.iteration)) {
                return Err(Conflict::ReadWrite {
                    var: f.var,
                    writer,
                    reader: f.iteration,
                });
            }
            if let Some(&writer) = f.writes.get(&key) {
                if writer != f.iteration {
                    return Err(Conflict::ReadWrite {
                        var: f.var,
                        writer,
                        reader: f.iteration,
                    });
                }
            }
            record(&mut f.reads, key, f.iteration);
        }
        Ok(())
    }
}

/// Adds `iteration` to the (up to two) iterations recorded for `key`.
fn record(map: &mut HashMap<(BufferId, usize), Readers>, key: (BufferId, usize), iteration: i64) {
    match map.entry(key) {
        Entry::Vacant(e) => {
            e.insert(Readers {
                first: iteration,
                other: None,
            });
        }
        Entry::Occupied(mut e) => {
            let r = e.get_mut();
            if r.first != iteration && r.other.is_none() {
                r.other = Some(iteration);
            }
        }
    }
}
