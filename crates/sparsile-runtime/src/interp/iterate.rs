//! Execution of statements: stores and sparse iterations.
//!
//! An iteration visits its axes in order; an axis with a parent ranges over the positions
//! stored under the parent's current position (the parent is iterated earlier in the same
//! iteration or by an enclosing one), a parentless axis over all its positions. The
//! iterator variable's value is the coordinate at the current position. `init`
//! statements run first, once per point of the spatial axes alone.

use sparsile_formats::Pos;
use sparsile_ir::coord::{IterAxis, IterKind, Program, SparseIteration, Stmt, Store};
use sparsile_ir::{AxisId, BufferId, DType, IdVec, IterVarId, ParamId};

use super::access::{resolve, Resolved};
use super::eval_expr::Scalar;
use super::state::{BoundAxis, BufState, BufValues, Buffers};
use super::InterpError;

/// The binding of an iterator variable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VarState {
    pub crd: i64,
    pub pos: Pos,
    /// The position of the axis's parent when this position was reached.
    pub parent_pos: Option<Pos>,
}

/// The interpreter's execution state.
pub(crate) struct Exec<'p, 'i> {
    pub program: &'p Program,
    pub params: IdVec<ParamId, Option<i64>>,
    pub axes: IdVec<AxisId, Option<BoundAxis<'i>>>,
    pub buffers: Buffers<'i>,
    pub vars: IdVec<IterVarId, Option<VarState>>,
    /// The current position of every axis being iterated.
    pub axis_pos: IdVec<AxisId, Option<Pos>>,
}

impl<'p, 'i> Exec<'p, 'i> {
    pub(crate) fn buffer(&self, id: BufferId) -> Result<&BufState<'i>, InterpError> {
        // Every buffer is allocated before execution starts.
        Ok(self.buffers[id]
            .as_ref()
            .expect("buffer allocated before execution"))
    }

    /// Runs a list of statements.
    pub(crate) fn run(&mut self, stmts: &[Stmt]) -> Result<(), InterpError> {
        for stmt in stmts {
            match stmt {
                Stmt::Store(store) => self.store(store)?,
                Stmt::Iteration(it) => self.iteration(it)?,
            }
        }
        Ok(())
    }

    fn store(&mut self, store: &Store) -> Result<(), InterpError> {
        let decl = &self.program.buffers[store.buffer];
        if decl.role == sparsile_ir::coord::BufferRole::Input {
            return Err(InterpError::StoreToInput {
                buffer: decl.name.clone(),
            });
        }
        let value = self.eval(&store.value)?;
        let value = match (decl.dtype, value) {
            (DType::I32 | DType::I64, Scalar::Float(_)) => {
                return Err(InterpError::FloatIntoInteger {
                    buffer: decl.name.clone(),
                })
            }
            (DType::I32, Scalar::Int(i)) if i32::try_from(i).is_err() => {
                return Err(InterpError::IntegerOutOfRange {
                    buffer: decl.name.clone(),
                    value: i,
                    dtype: decl.dtype.to_string(),
                })
            }
            (_, v) => v.as_f64(),
        };
        let args = self.index_args(store.buffer, &store.indices)?;
        let state = self.buffers[store.buffer]
            .as_mut()
            .expect("buffer allocated before execution");
        match resolve(&state.structure, &args) {
            Resolved::At(offset) => match &mut state.values {
                BufValues::Owned(values) => {
                    let len = values.len();
                    let slot = values.get_mut(offset).unwrap_or_else(|| {
                        panic!("value offset {offset} past the {len} values of a buffer")
                    });
                    *slot = value;
                    Ok(())
                }
                BufValues::Borrowed(_) => Err(InterpError::StoreToInput {
                    buffer: decl.name.clone(),
                }),
            },
            Resolved::OutOfRange => Ok(()),
            Resolved::NotStored => Err(InterpError::WriteNotStored {
                buffer: decl.name.clone(),
                coordinates: args.iter().map(|a| a.crd).collect(),
            }),
        }
    }

    /// Checks that every axis's parent is iterated before it (here or by an enclosing
    /// iteration) and that no spatial axis has a reduction parent.
    fn check_iteration(&self, it: &SparseIteration) -> Result<(), InterpError> {
        for (k, ia) in it.axes.iter().enumerate() {
            let decl = &self.program.axes[ia.axis];
            let Some(parent) = decl.parent else { continue };
            let here = it.axes[..k].iter().find(|x| x.axis == parent);
            match here {
                Some(p) => {
                    if ia.kind == IterKind::Spatial && p.kind == IterKind::Reduction {
                        return Err(InterpError::SpatialUnderReduction {
                            iteration: it.name.clone(),
                            axis: decl.name.clone(),
                            parent: self.program.axes[parent].name.clone(),
                        });
                    }
                }
                None if self.axis_pos[parent].is_some() => {}
                None => {
                    return Err(InterpError::ParentNotIterated {
                        iteration: it.name.clone(),
                        axis: decl.name.clone(),
                        parent: self.program.axes[parent].name.clone(),
                    })
                }
            }
        }
        for ia in &it.axes {
            if self.axes[ia.axis].is_none() {
                return Err(InterpError::AxisHasNoStructure {
                    axis: self.program.axes[ia.axis].name.clone(),
                });
            }
        }
        Ok(())
    }

    fn iteration(&mut self, it: &SparseIteration) -> Result<(), InterpError> {
        self.check_iteration(it)?;
        if !it.init.is_empty() {
            let spatial: Vec<IterAxis> = it
                .axes
                .iter()
                .filter(|a| a.kind == IterKind::Spatial)
                .cloned()
                .collect();
            self.nest(&spatial, &it.init)?;
        }
        self.nest(&it.axes, &it.body)
    }

    /// Runs `stmts` at every point of `axes`.
    fn nest(&mut self, axes: &[IterAxis], stmts: &[Stmt]) -> Result<(), InterpError> {
        let Some((ia, rest)) = axes.split_first() else {
            return self.run(stmts);
        };
        let parent_pos = self.program.axes[ia.axis]
            .parent
            .and_then(|p| self.axis_pos[p]);
        let bound = self.axes[ia.axis]
            .as_ref()
            .expect("checked by check_iteration");
        let range = bound.storage().positions(parent_pos);
        let saved_var = self.vars[ia.var];
        let saved_pos = self.axis_pos[ia.axis];
        for p in range.clone() {
            let storage = self.axes[ia.axis]
                .as_ref()
                .expect("checked by check_iteration")
                .storage();
            let crd = storage.coordinate(Pos(p), range.start).0;
            self.vars[ia.var] = Some(VarState {
                crd: i64::try_from(crd).unwrap_or(i64::MAX),
                pos: Pos(p),
                parent_pos,
            });
            self.axis_pos[ia.axis] = Some(Pos(p));
            let result = self.nest(rest, stmts);
            if result.is_err() {
                self.vars[ia.var] = saved_var;
                self.axis_pos[ia.axis] = saved_pos;
                return result;
            }
        }
        self.vars[ia.var] = saved_var;
        self.axis_pos[ia.axis] = saved_pos;
        Ok(())
    }
}
