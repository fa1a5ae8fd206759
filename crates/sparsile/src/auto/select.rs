//! The automatic choice of a candidate for one call: the tuning database's record for
//! the exact input, else the learned selector's pick, else the static rule. A selector's
//! pick comes with the short list the caller times before settling on one
//! ([`Selection::trial`], [`sparsile_tune::trial`]) unless `SPARSILE_TRIAL=0`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use sparsile_formats::SparseTensor;
use sparsile_ir::settings::Settings;
use sparsile_tune::db::{Db, Key};
use sparsile_tune::features::Features;
use sparsile_tune::op::{OpInfo, Operator};
use sparsile_tune::rule::{block_format, rule};
use sparsile_tune::selector::Selector;
use sparsile_tune::space::{space, Candidate, KERNEL_VERSION, SPACE_VERSION};
use sparsile_tune::target::host_isa;
use sparsile_tune::trial::shortlist;

use super::pattern::{pattern, Pattern};
use crate::evaluate::buffer_name;

/// Where a choice came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A measured best for this exact input (`sparsile tune`).
    Database,
    /// The learned selector's prediction.
    Selector,
    /// The static rule (no record, no selector model, or no sparse operand).
    Rule,
    /// Named by the caller.
    Explicit,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Database => "tuning database",
            Source::Selector => "selector",
            Source::Rule => "rule",
            Source::Explicit => "explicit",
        }
    }
}

/// A choice with what it was made from.
#[derive(Debug, Clone, Serialize)]
pub struct Selection {
    pub op: Operator,
    pub candidate: Candidate,
    pub source: Source,
    /// The input's features (none without a sparse operand).
    pub features: Option<Features>,
    /// The database key of the input (none for a borrowed pattern).
    pub key: Option<Key>,
    /// Why a better source was not used (a refused model file, …), or how the input
    /// could run faster (a block format for an operand that keeps its own).
    pub note: Option<String>,
    /// The dense width `K` the choice is for (1 for SpMV).
    pub width: usize,
    /// The candidates to time before settling, `candidate` first (see
    /// [`sparsile_tune::trial`]); empty when the choice needs no trial or has had it.
    pub trial: Vec<Candidate>,
}

impl Selection {
    /// Adds `note` after the note the choice has, if any (`; ` between them).
    pub fn add_note(&mut self, note: String) {
        self.note = Some(match self.note.take() {
            Some(n) => format!("{n}; {note}"),
            None => note,
        });
    }
}

/// What the choice depends on besides the inputs.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// A fingerprint of the program (its text).
    pub program: &'a str,
    pub info: &'a OpInfo,
    pub threads: usize,
    /// Whether candidates may store the sparse operand in another format.
    pub other_formats: bool,
}

/// The database of the settings' path (`SPARSILE_TUNING_DB`, else `tuning.jsonl` in the
/// private cache folder: none when that folder is refused), opened once per path.
pub fn database(settings: &Settings) -> Option<Arc<Db>> {
    type Dbs = Mutex<HashMap<std::path::PathBuf, Arc<Db>>>;
    static DBS: OnceLock<Dbs> = OnceLock::new();
    let path = match &settings.tuning_db {
        Some(p) => p.clone(),
        None => sparsile_runtime::jit::private_cache_dir(settings)
            .ok()?
            .join("tuning.jsonl"),
    };
    let mut m = DBS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    Some(Arc::clone(
        m.entry(path.clone())
            .or_insert_with(|| Arc::new(Db::open(&path))),
    ))
}

/// The selector: `SPARSILE_SELECTOR_MODEL`'s file, else the built-in model for this
/// host's vector instructions (`Selector::embedded`); a refused or missing one is the
/// error text (the rule is used then).
pub fn selector(settings: &Settings) -> Result<Arc<Selector>, String> {
    static EMBEDDED: OnceLock<Result<Arc<Selector>, String>> = OnceLock::new();
    type Files = Mutex<HashMap<std::path::PathBuf, Result<Arc<Selector>, String>>>;
    static FILES: OnceLock<Files> = OnceLock::new();
    if let Some(path) = &settings.selector_model {
        let mut m = FILES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        return m
            .entry(path.clone())
            .or_insert_with(|| {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("selector model {}: {e}", path.display()))?;
                Selector::from_json(&text)
                    .map(Arc::new)
                    .map_err(|e| format!("{} ({})", e, path.display()))
            })
            .clone();
    }
    EMBEDDED
        .get_or_init(|| match Selector::embedded() {
            Some((name, r)) => r
                .map(Arc::new)
                .map_err(|e| format!("{e} (built-in {name})")),
            None => Err("this build has no selector model".to_string()),
        })
        .clone()
}

/// The compiler's identity (for database keys), found once per compiler command.
pub fn compiler_identity(settings: &Settings) -> String {
    static IDS: OnceLock<Mutex<HashMap<Option<String>, String>>> = OnceLock::new();
    let mut m = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    m.entry(settings.cc.clone())
        .or_insert_with(|| {
            sparsile_runtime::jit::Compiler::detect(settings)
                .map(|c| c.identity())
                .unwrap_or_else(|_| "none".to_string())
        })
        .clone()
}

/// The sparse operand and the dense width of `inputs` for `info`.
pub fn operands<'t, 'a>(
    info: &OpInfo,
    inputs: &'t HashMap<String, SparseTensor<'a>>,
) -> (Option<&'t SparseTensor<'a>>, usize) {
    let find = |name: &str| {
        inputs.get(name).or_else(|| {
            inputs
                .iter()
                .find(|(k, _)| buffer_name(k) == name)
                .map(|(_, t)| t)
        })
    };
    let sparse = info.sparse.as_deref().and_then(find);
    let width = info
        .width
        .as_ref()
        .and_then(|(b, axis)| find(b).and_then(|t| t.shape().get(*axis).copied()))
        .unwrap_or(1);
    (sparse, width)
}

/// The database key of an input with pattern `p`.
pub fn key(
    ctx: &Context,
    settings: &Settings,
    p: &Pattern,
    t: &SparseTensor<'_>,
    width: usize,
) -> Option<Key> {
    let pattern = p.fingerprint.clone()?;
    let index = t
        .structure
        .axes
        .iter()
        .find_map(|a| a.indices.as_ref().or(a.indptr.as_ref()))
        .map(|a| a.index_type().to_string())
        .unwrap_or_else(|| "none".into());
    // A known operator is its own name, so that the records of `sparsile tune` serve
    // every program computing it (the Python operators', the command line's).
    let program = match ctx.info.op {
        Operator::Other => ctx.program.to_string(),
        op => op.name().to_string(),
    };
    Some(Key {
        program,
        pattern,
        dense: vec![width],
        dtype: t.dtype().to_string(),
        index,
        threads: ctx.threads,
        target: sparsile_tune::target::host(),
        compiler: compiler_identity(settings),
        other_formats: ctx.other_formats,
        space_version: SPACE_VERSION,
        kernel_version: KERNEL_VERSION,
    })
}

/// Chooses a candidate for `inputs` (see the module docs).
pub fn select(
    ctx: &Context,
    inputs: &HashMap<String, SparseTensor<'_>>,
    settings: &Settings,
) -> Selection {
    let op = ctx.info.op;
    let (sparse, width) = operands(ctx.info, inputs);
    let plain = |format: String, note: Option<String>| Selection {
        op,
        candidate: Candidate::new(format, "default"),
        source: Source::Rule,
        features: None,
        key: None,
        note,
        width,
        trial: Vec::new(),
    };
    let Some(t) = sparse else {
        return plain("dense".into(), Some("no sparse operand".into()));
    };
    let Some(p) = pattern(t) else {
        return plain(
            t.format().to_string(),
            Some("the sparse operand is not a matrix".into()),
        );
    };
    let bytes = t.dtype().size_bytes();
    let features = Features::of(&p.csr(), op, width, ctx.threads, bytes);
    let key = key(ctx, settings, &p, t, width);
    let allowed = |c: &Candidate| ctx.other_formats || c.format == p.format;
    let mut note = None;
    if let (Some(k), Some(db)) = (&key, database(settings)) {
        match db.best(k) {
            Ok(Some(r)) if allowed(&r.candidate) => {
                return Selection {
                    op,
                    candidate: r.candidate,
                    source: Source::Database,
                    features: Some(features),
                    key,
                    note: None,
                    width,
                    trial: Vec::new(),
                }
            }
            Ok(_) => {}
            Err(e) => note = Some(e.to_string()),
        }
    }
    // The selector's corpus holds few operands with full blocks (and its SDDMM labels no
    // block candidate): a nearly full block structure decides the format first.
    if let Some(c) = block_format(op, &features, &p.format, ctx.other_formats, host_isa()) {
        return Selection {
            op,
            candidate: c,
            source: Source::Rule,
            features: Some(features),
            key,
            note: Some("aligned blocks full enough to pay: a block format".into()),
            width,
            trial: Vec::new(),
        };
    }
    // The operand keeps its format, but blocks would pay: say how to get them.
    if !ctx.other_formats {
        if let Some(c) = block_format(op, &features, &p.format, true, host_isa()) {
            let hint = format!(
                "its aligned blocks are nearly full: stored as `{0}` (Python: `sparsile.from_scipy(A, format=\"{0}\")`) it runs a register-tiled kernel",
                c.format
            );
            note = Some(match note {
                Some(n) => format!("{n}; {hint}"),
                None => hint,
            });
        }
    }
    let candidates = space(op, &features, &p.format, ctx.other_formats);
    match selector(settings) {
        Ok(s) => {
            if let Some(c) = s.choose(op, &features, &candidates) {
                let trial = if settings.no_trial {
                    Vec::new()
                } else {
                    shortlist(
                        &s,
                        op,
                        &features,
                        &candidates,
                        &c,
                        &p.format,
                        ctx.other_formats,
                    )
                };
                return Selection {
                    op,
                    candidate: c,
                    source: Source::Selector,
                    features: Some(features),
                    key,
                    note,
                    width,
                    trial: if trial.len() > 1 { trial } else { Vec::new() },
                };
            }
        }
        Err(e) => note = note.or(Some(e)),
    }
    Selection {
        op,
        candidate: rule(op, &features, &p.format, ctx.other_formats),
        source: Source::Rule,
        features: Some(features),
        key,
        note,
        width,
        trial: Vec::new(),
    }
}
