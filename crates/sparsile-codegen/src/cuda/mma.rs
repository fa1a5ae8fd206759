//! `mma` statements as inline-PTX `mma.sync` (placeholder).

use sparsile_ir::loops::Mma;

use super::stmt::Launch;
use crate::c::ctx::Ctx;
use crate::c::stmt::Writer;
use crate::CodegenError;

pub(super) fn emit_mma(
    _ctx: &mut Ctx,
    _launch: &Launch,
    _w: &mut Writer,
    m: &Mma,
) -> Result<(), CodegenError> {
    Err(CodegenError::CudaUnsupported {
        what: "an `mma`".to_string(),
        span: m.span,
    })
}
