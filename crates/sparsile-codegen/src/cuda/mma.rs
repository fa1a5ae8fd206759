//! `mma` statements as inline-PTX `mma.sync.aligned.SHAPE.row.col.f32.TYPE.TYPE.f32`
//! (sm_80 and later; semantics in [`sparsile_ir::loops::mma`]).
//!
//! Each lane of the warp finds its lane number (`%laneid`), `g = lane >> 2` and
//! `t = lane & 3`, then:
//! 1. evaluates every element of its A and B fragments, the PTX ISA's layouts
//!    ([`fragment_element`]): for element `i` the tile variables are set to the element's
//!    row and column (`g`, `2·t`, … plus constants of `i`) in a scope of their own, and the
//!    operand expression is written there. An f16/bf16 operand that is a load of a buffer
//!    of its type (or `select`s of such loads and zeros) moves the element's raw 16 bits;
//!    any other operand is computed in f32 and rounded (`cvt.rn.f16.f32`,
//!    `cvt.rn.bf16.f32`, `cvt.rna.tf32.f32`). Two 16-bit elements share a 32-bit register,
//!    the lower-numbered one in the low half;
//! 2. loads its four accumulator elements (zero where the guard fails);
//! 3. issues the `mma.sync` (`asm volatile`, registers through `"r"`/`"f"` constraints);
//! 4. stores the four results back where the guard holds.
//!
//! ```text
//! mma m16n8k8 tf32 (r, c, p) C[r * 8 + c] += X[r * 8 + p] * X[p * 8 + c]
//!   ->  { unsigned int mma_lane; asm("mov.u32 %0, %%laneid;" : "=r"(mma_lane));
//!         const int64_t mma_g = (int64_t)(mma_lane >> 2u), mma_t = …;
//!         unsigned int mma_a[4]; { const int64_t r = mma_g; const int64_t p = mma_t;
//!                                  mma_a[0] = sparsile_f32_to_tf32(X[r * 8 + p]); } …
//!         asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 …" : … : …);
//!         … C[r * 8 + c] = mma_d[0]; … }
//! ```

use sparsile_ir::loops::{
    constant_extent, fragment_element, fragment_len, Expr, For, ForKind, GpuAxis, Mma, MmaOperand,
    MmaShape, MmaType, Stmt,
};
use sparsile_ir::{DType, VarId};

use crate::c::ctx::Ctx;
use crate::c::expr::{emit_as, emit_offset, emit_truth, Code, PREC_COND, PREC_PRIMARY};
use crate::c::prelude::Helper;
use crate::c::stmt::{comment_text, Writer};
use crate::c::types::Ty;
use crate::CodegenError;

/// Where a fragment's elements are: coordinate = `g·cg + t·ct + offset(i)` for the row
/// and the column.
struct Layout {
    row: (u32, u32),
    col: (u32, u32),
    offsets: Vec<(u32, u32)>,
}

/// The layout of `operand`'s fragment, read off the IR's table (lane 0 gives the offsets,
/// lanes 4 and 1 the weights of `g` and `t`; the table is linear in them).
fn layout(shape: MmaShape, ty: MmaType, operand: MmaOperand) -> Layout {
    let at = |lane, i| fragment_element(shape, ty, operand, lane, i);
    let offsets: Vec<(u32, u32)> = (0..fragment_len(shape, operand))
        .map(|i| at(0, i))
        .collect();
    let (r0, c0) = at(0, 0);
    let (rg, cg) = at(4, 0);
    let (rt, ct) = at(1, 0);
    Layout {
        row: (rg - r0, rt - r0),
        col: (cg - c0, ct - c0),
        offsets,
    }
}

/// `weight_g·g + weight_t·t + offset` as C text over the names of `g` and `t`.
fn coordinate(weights: (u32, u32), offset: u32, g: &str, t: &str) -> String {
    let mut terms = Vec::new();
    for (w, name) in [(weights.0, g), (weights.1, t)] {
        match w {
            0 => {}
            1 => terms.push(name.to_string()),
            w => terms.push(format!("{w} * {name}")),
        }
    }
    if offset > 0 || terms.is_empty() {
        terms.push(offset.to_string());
    }
    terms.join(" + ")
}

/// The element type whose raw bits an operand of `ty` is made of (f16, bf16), if any.
fn half_dtype(ty: MmaType) -> Option<DType> {
    match ty {
        MmaType::F16 => Some(DType::F16),
        MmaType::BF16 => Some(DType::BF16),
        MmaType::TF32 => None,
    }
}

/// The raw 16 bits of `e` when it is a load of a `dtype` buffer, a zero, or a `select`
/// of such; `None` otherwise.
fn raw_bits(ctx: &mut Ctx, e: &Expr, dtype: DType) -> Result<Option<Code>, CodegenError> {
    Ok(match e {
        Expr::Load { buffer, indices } if ctx.buffer(*buffer)?.dtype == dtype => {
            let offset = emit_offset(ctx, *buffer, indices)?;
            Some(Code {
                text: format!("{}[{}]", ctx.buffer_name(*buffer)?, offset.text),
                prec: PREC_PRIMARY,
            })
        }
        // ±0 in f16 and bf16: the sign bit alone.
        Expr::Float(x) if *x == 0.0 => Some(Code {
            text: if x.is_sign_negative() {
                "0x8000u"
            } else {
                "0u"
            }
            .to_string(),
            prec: PREC_PRIMARY,
        }),
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            let (Some(t), Some(o)) = (
                raw_bits(ctx, then, dtype)?,
                raw_bits(ctx, otherwise, dtype)?,
            ) else {
                return Ok(None);
            };
            let c = emit_truth(ctx, cond)?;
            Some(Code {
                text: format!(
                    "{} ? {} : {}",
                    c.at(PREC_COND + 1),
                    t.at(PREC_COND + 1),
                    o.at(PREC_COND + 1)
                ),
                prec: PREC_COND,
            })
        }
        _ => None,
    })
}

/// The C text of one operand element's register value: 16 bits for f16/bf16, the 32
/// bits of a tf32 for tf32.
fn operand_value(ctx: &mut Ctx, e: &Expr, ty: MmaType) -> Result<String, CodegenError> {
    if let Some(dtype) = half_dtype(ty) {
        if let Some(bits) = raw_bits(ctx, e, dtype)? {
            return Ok(bits.text);
        }
    }
    let v = emit_as(ctx, e, Ty::F32)?;
    let (helper, name) = match ty {
        MmaType::F16 => (Helper::F32ToF16, "sparsile_f32_to_f16"),
        MmaType::BF16 => (Helper::F32ToBf16, "sparsile_f32_to_bf16"),
        MmaType::TF32 => (Helper::F32ToTf32, "sparsile_f32_to_tf32"),
    };
    ctx.helpers.insert(helper);
    Ok(format!("{name}({})", v.text))
}

/// The names of the lane's `g` and `t`.
struct Lane {
    g: String,
    t: String,
}

/// A warp's accumulator fragment of one `mma`: the names of its registers and of its
/// guard flags, and each element's scope declarations and C lvalue.
pub(super) struct Accumulator {
    lane: Lane,
    c: String,
    inside: String,
    element: Vec<(Vec<String>, String)>,
}

/// `{ const int64_t row = …; const int64_t col = …; BODY }` for element `i` of a
/// fragment: declares the tile variables the statement's expressions (`used`) read.
fn element_scope(
    ctx: &mut Ctx,
    lane: &Lane,
    layout: &Layout,
    i: usize,
    vars: (VarId, VarId),
    used: &[&Expr],
) -> Result<Vec<String>, CodegenError> {
    let (r, c) = layout.offsets[i];
    let mut lines = Vec::new();
    for (v, weights, offset) in [(vars.0, layout.row, r), (vars.1, layout.col, c)] {
        if used.iter().any(|e| e.reads_var(v)) {
            lines.push(format!(
                "const int64_t {} = {};",
                ctx.var_name(v)?,
                coordinate(weights, offset, &lane.g, &lane.t)
            ));
        }
    }
    Ok(lines)
}

/// Writes `{ DECLS LINE }` on one line.
fn scoped(w: &mut Writer, decls: &[String], line: &str) {
    if decls.is_empty() {
        w.line(line);
    } else {
        w.line(&format!("{{ {} {line} }}", decls.join(" ")));
    }
}

/// Declares the lane number and the lane's `g` and `t`.
fn lane_setup(ctx: &mut Ctx, w: &mut Writer) -> Lane {
    let [lane_name, g, t] = ["mma_lane", "mma_g", "mma_t"].map(|n| ctx.names.fresh(n));
    w.line(&format!("unsigned int {lane_name};"));
    w.line(&format!(
        "asm(\"mov.u32 %0, %%laneid;\" : \"=r\"({lane_name}));"
    ));
    w.line(&format!(
        "const int64_t {g} = (int64_t)({lane_name} >> 2u);"
    ));
    w.line(&format!("const int64_t {t} = (int64_t)({lane_name} & 3u);"));
    Lane { g, t }
}

/// The comment line that opens an `mma`'s scope.
fn opening(ctx: &Ctx, m: &Mma, what: &str) -> Result<String, CodegenError> {
    Ok(format!(
        "{{ /* mma {} {} into {}{what}: the warp's {} x {} tile, depth {} (PTX fragment layouts) */",
        m.shape,
        m.ty,
        comment_text(ctx.buffer_name(m.c)?),
        m.shape.m(),
        m.shape.n(),
        m.shape.k()
    ))
}

/// Evaluates the A and B fragments into registers; returns the 32-bit register
/// expressions (A's first) and how many are A's.
fn operand_registers(
    ctx: &mut Ctx,
    w: &mut Writer,
    m: &Mma,
    lane: &Lane,
) -> Result<(Vec<String>, usize), CodegenError> {
    let half = half_dtype(m.ty).is_some();
    let mut registers: Vec<String> = Vec::new();
    for (operand, expr, vars, base) in [
        (MmaOperand::A, &m.a, (m.row, m.depth), "mma_a"),
        (MmaOperand::B, &m.b, (m.depth, m.col), "mma_b"),
    ] {
        let layout = layout(m.shape, m.ty, operand);
        let n = layout.offsets.len();
        let name = ctx.names.fresh(base);
        let elem_ty = if half {
            "unsigned short"
        } else {
            "unsigned int"
        };
        w.line(&format!("{elem_ty} {name}[{n}];"));
        for i in 0..n {
            let decls = element_scope(ctx, lane, &layout, i, vars, &[expr])?;
            let value = operand_value(ctx, expr, m.ty)?;
            scoped(w, &decls, &format!("{name}[{i}] = {value};"));
        }
        if half {
            for j in 0..n / 2 {
                registers.push(format!(
                    "(unsigned int){name}[{}] | ((unsigned int){name}[{}] << 16)",
                    2 * j,
                    2 * j + 1
                ));
            }
        } else {
            registers.extend((0..n).map(|i| format!("{name}[{i}]")));
        }
    }
    let a_registers = fragment_len(m.shape, MmaOperand::A) as usize / if half { 2 } else { 1 };
    Ok((registers, a_registers))
}

/// Loads the lane's accumulator elements (zero where the guard fails).
fn load_accumulator(
    ctx: &mut Ctx,
    w: &mut Writer,
    m: &Mma,
    lane: Lane,
) -> Result<Accumulator, CodegenError> {
    let c_name = ctx.buffer_name(m.c)?.to_string();
    let layout = layout(m.shape, m.ty, MmaOperand::C);
    let n = layout.offsets.len();
    let c = ctx.names.fresh("mma_c");
    let inside = ctx.names.fresh("mma_in");
    w.line(&format!("float {c}[{n}];"));
    if m.guard.is_some() {
        w.line(&format!("int {inside}[{n}];"));
    }
    let mut used: Vec<&Expr> = m.c_indices.iter().collect();
    used.extend(m.guard.as_ref());
    let indices: Vec<&Expr> = m.c_indices.iter().collect();
    let mut element = Vec::with_capacity(n);
    for i in 0..n {
        let decls = element_scope(ctx, &lane, &layout, i, (m.row, m.col), &used)?;
        let offset = emit_offset(ctx, m.c, &m.c_indices)?;
        let load = format!("{c_name}[{}]", offset.text);
        let store_decls = element_scope(ctx, &lane, &layout, i, (m.row, m.col), &indices)?;
        let line = match &m.guard {
            Some(guard) => {
                let holds = emit_truth(ctx, guard)?;
                format!(
                    "{inside}[{i}] = {}; {c}[{i}] = {inside}[{i}] ? {load} : 0.0f;",
                    holds.text
                )
            }
            None => format!("{c}[{i}] = {load};"),
        };
        scoped(w, &decls, &line);
        element.push((store_decls, load));
    }
    Ok(Accumulator {
        lane,
        c,
        inside,
        element,
    })
}

/// Issues the `mma.sync` on the operand registers and the accumulator `acc`, its results
/// into `d` (declared here).
fn issue(
    ctx: &mut Ctx,
    w: &mut Writer,
    m: &Mma,
    (registers, a_registers): (Vec<String>, usize),
    acc: &Accumulator,
) -> String {
    let n = acc.element.len();
    let (c, d) = (&acc.c, ctx.names.fresh("mma_d"));
    let outputs: Vec<String> = (0..n).map(|i| format!("\"=f\"({d}[{i}])")).collect();
    let mut inputs: Vec<String> = registers.iter().map(|r| format!("\"r\"({r})")).collect();
    inputs.extend((0..n).map(|i| format!("\"f\"({c}[{i}])")));
    let list = |from: usize, count: usize| {
        let regs: Vec<String> = (from..from + count).map(|k| format!("%{k}")).collect();
        format!("{{{}}}", regs.join(", "))
    };
    let b_registers = registers.len() - a_registers;
    let template = format!(
        "mma.sync.aligned.{}.row.col.f32.{}.{}.f32 {}, {}, {}, {};",
        m.shape,
        m.ty,
        m.ty,
        list(0, n),
        list(n, a_registers),
        list(n + a_registers, b_registers),
        list(n + registers.len(), n)
    );
    w.line(&format!("float {d}[{n}];"));
    w.line(&format!("asm volatile(\"{template}\""));
    w.indent += 1;
    w.line(&format!(": {}", outputs.join(", ")));
    w.line(&format!(": {});", inputs.join(", ")));
    w.indent -= 1;
    d
}

/// Stores the elements of `values` (an array of the accumulator's length) where the
/// guard holds.
fn store_accumulator(w: &mut Writer, m: &Mma, acc: &Accumulator, values: &str) {
    for (i, (decls, load)) in acc.element.iter().enumerate() {
        let store = if m.guard.is_some() {
            format!("if ({}[{i}]) {load} = {values}[{i}];", acc.inside)
        } else {
            format!("{load} = {values}[{i}];")
        };
        scoped(w, decls, &store);
    }
}

/// One `mma` statement (see the module docs).
pub(super) fn emit_mma(ctx: &mut Ctx, w: &mut Writer, m: &Mma) -> Result<(), CodegenError> {
    w.line(&opening(ctx, m, "")?);
    w.indent += 1;
    let lane = lane_setup(ctx, w);
    let registers = operand_registers(ctx, w, m, &lane)?;
    let acc = load_accumulator(ctx, w, m, lane)?;
    let d = issue(ctx, w, m, registers, &acc);
    store_accumulator(w, m, &acc, &d);
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// Before a loop that adds into one tile on every iteration ([`carried_mma`]): opens a
/// scope and loads the lane's accumulator elements once.
pub(super) fn open_carried(
    ctx: &mut Ctx,
    w: &mut Writer,
    m: &Mma,
) -> Result<Accumulator, CodegenError> {
    w.line(&opening(ctx, m, ", kept in registers across the loop")?);
    w.indent += 1;
    let lane = lane_setup(ctx, w);
    load_accumulator(ctx, w, m, lane)
}

/// Inside the loop: the operand fragments and the `mma.sync`, its results kept in the
/// accumulator's registers.
pub(super) fn emit_carried_mma(
    ctx: &mut Ctx,
    w: &mut Writer,
    m: &Mma,
    acc: &Accumulator,
) -> Result<(), CodegenError> {
    w.line("{");
    w.indent += 1;
    let registers = operand_registers(ctx, w, m, &acc.lane)?;
    let d = issue(ctx, w, m, registers, acc);
    for i in 0..acc.element.len() {
        w.line(&format!("{}[{i}] = {d}[{i}];", acc.c));
    }
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// After the loop: stores the accumulator once and closes the scope.
pub(super) fn close_carried(w: &mut Writer, m: &Mma, acc: &Accumulator) {
    store_accumulator(w, m, acc, &acc.c);
    w.indent -= 1;
    w.line("}");
}

/// The `mma` that serial loop `f` adds into one and the same tile on every iteration,
/// if it is one: the loop's body is `let`s and loops bound to threads, nested, around
/// exactly one `mma`; the `mma`'s output indices and guard read no variable the loop
/// defines (its own, a `let`'s, a bound loop's), and its operands do not read its
/// output; and every thread-bound loop among them spans its whole dimension of the
/// launch's `block` (the threads a narrower one leaves out would load and store the tile
/// around the loop too, racing with the warp that updates it). Such a tile can stay in
/// registers across the loop. Loops of literal bounds are left as they are: the CUDA
/// compiler unrolls them and forwards the stores itself, and a scope of registers around
/// them only adds to the pressure (a 32 x 32 block's depth loop spilled with it).
pub(super) fn carried_mma(f: &For, block: [i64; 3]) -> Option<&Mma> {
    if matches!((&f.lo, &f.hi), (Expr::Int(_), Expr::Int(_))) {
        return None;
    }
    let mut defined = vec![f.var];
    let mut body = &f.body;
    let m = loop {
        let (last, lets) = body.split_last()?;
        for s in lets {
            match s {
                Stmt::Let { var, .. } => defined.push(*var),
                _ => return None,
            }
        }
        match last {
            Stmt::For(g) => {
                let ForKind::Bound(GpuAxis::Thread(dim)) = g.kind else {
                    return None;
                };
                if constant_extent(g) != Some(block[dim.index()]) {
                    return None;
                }
                defined.push(g.var);
                body = &g.body;
            }
            Stmt::Mma(m) => break m,
            _ => return None,
        }
    };
    let reads_defined = |e: &Expr| defined.iter().any(|&v| e.reads_var(v));
    let reads_c = |e: &Expr| {
        let mut hit = false;
        e.visit(&mut |x| hit |= matches!(x, Expr::Load { buffer, .. } if *buffer == m.c));
        hit
    };
    let fixed =
        !m.c_indices.iter().any(reads_defined) && !m.guard.as_ref().is_some_and(reads_defined);
    (fixed && !reads_c(&m.a) && !reads_c(&m.b)).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IR's fragment table is `g·cg + t·ct + offset(i)` for every shape, type,
    /// operand, lane and element: what the emitted code computes.
    #[test]
    fn fragment_layouts_are_linear_in_g_and_t() {
        for ty in MmaType::ALL {
            for &shape in ty.shapes() {
                for operand in MmaOperand::ALL {
                    let l = layout(shape, ty, operand);
                    for lane in 0..32 {
                        let (g, t) = (lane / 4, lane % 4);
                        for (i, &(r, c)) in l.offsets.iter().enumerate() {
                            let want = fragment_element(shape, ty, operand, lane, i as u32);
                            let got =
                                (l.row.0 * g + l.row.1 * t + r, l.col.0 * g + l.col.1 * t + c);
                            assert_eq!(got, want, "{shape} {ty} {operand:?} lane {lane} i {i}");
                        }
                    }
                }
            }
        }
    }

    /// The first serial loop of `stmts`, searched depth first.
    fn find_serial(stmts: &[Stmt]) -> Option<&For> {
        stmts.iter().find_map(|s| match s {
            Stmt::For(f) if f.kind == ForKind::Serial => Some(f),
            Stmt::For(f) => find_serial(&f.body),
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => find_serial(body),
            _ => None,
        })
    }

    const CARRIED: &str = "flat func f(m, nb, nnzb) {
  buffer C: f32[m * 8] output values
  buffer A: f16[nnzb * 256] input values
  buffer B: f16[nnzb * 128] input values
  buffer A_indptr: i32[nb + 1] input indptr(A, 1)
  launch l {
    for io in 0..nb bind(blockIdx.x) {
      for jo_p in A_indptr[io]..A_indptr[io + 1] {
        for lane in 0..32 bind(threadIdx.x) {
          mma m16n8k16 f16 (ii, kk, ji) where io * 16 + ii < m: C[(io * 16 + ii) * 8 + kk] += A[jo_p * 256 + (ii * 16 + ji)] * B[jo_p * 128 + (ji * 8 + kk)]
        }
      }
    }
  }
}";

    /// A loop adding into one tile is carried when its thread-bound loops span the block,
    /// not when one is narrower (the other threads would store the tile around the loop),
    /// nor when the tile moves with the loop.
    #[test]
    fn carried_only_where_every_thread_runs_the_mma_and_the_tile_stays() {
        let func: sparsile_ir::loops::Func = CARRIED.parse().unwrap();
        let f = find_serial(&func.body).expect("the blocks' loop");
        assert!(carried_mma(f, [32, 1, 1]).is_some());
        assert!(carried_mma(f, [64, 1, 1]).is_none());
        let moving = CARRIED.replace("C[(io * 16 + ii) * 8 + kk]", "C[(jo_p * 16 + ii) * 8 + kk]");
        let func: sparsile_ir::loops::Func = moving.parse().unwrap();
        let f = find_serial(&func.body).expect("the blocks' loop");
        assert!(carried_mma(f, [32, 1, 1]).is_none());
    }

    #[test]
    fn coordinates_print_without_zero_terms() {
        assert_eq!(coordinate((1, 0), 0, "g", "t"), "g");
        assert_eq!(coordinate((0, 2), 9, "g", "t"), "2 * t + 9");
        assert_eq!(coordinate((0, 0), 0, "g", "t"), "0");
    }
}
