//! `--recipe auto` (the default of `run` and `compile`): the automatic choice for the
//! inputs at hand, with the sparse operand's format left to it unless `--format` names
//! one (the command line reads the operand from a file, so storing it otherwise costs a
//! conversion before the timed runs, never a wrong answer).

use anyhow::Result;
use sparsile::auto::Selection;

use crate::cmd_eval::{self, EvalArgs, Prepared};

/// What to run: the program and inputs (re-read in the chosen format when it differs),
/// the recipe spec, and the choice when one was made here.
pub struct Resolved {
    pub prepared: Prepared,
    pub recipe: Option<String>,
    pub selection: Option<Selection>,
    /// How the trial got the winner's kernel (compiled or found in the cache), when a
    /// trial ran: compiling it again after is a cache hit that says nothing.
    pub trial_compile: Option<sparsile_runtime::CompileInfo>,
}

/// Resolves `recipe` (`None` or `auto`: choose) for `prepared`; with `trial`, a
/// selection with a short list is settled by timing it on the inputs (`run`; `compile`
/// runs nothing and takes the selector's pick).
pub fn resolve(
    args: &EvalArgs,
    prepared: Prepared,
    recipe: Option<&str>,
    has_schedule: bool,
    threads: usize,
    trial: bool,
) -> Result<Resolved> {
    if has_schedule || recipe.is_some_and(|r| r != "auto") {
        return Ok(Resolved {
            prepared,
            recipe: recipe.map(str::to_string),
            selection: None,
            trial_compile: None,
        });
    }
    let other_formats = args.formats.is_empty();
    let mut selection =
        sparsile::auto::choose(&prepared.text, &prepared.inputs, threads, other_formats)?;
    let t0 = std::time::Instant::now();
    let mut trial_compile = None;
    let list = if trial { &selection.trial[..] } else { &[] };
    if let Some((winner, others, compiled)) = settle(args, &prepared, list, threads) {
        trial_compile = compiled;
        let note = format!(
            "timed against {others} close predictions in {:.0} ms, compiles included",
            t0.elapsed().as_secs_f64() * 1e3
        );
        selection.add_note(note);
        selection.candidate = winner;
    }
    selection.trial.clear();
    let current = sparse_format(&prepared);
    let prepared = match (&current, sparse_name(&prepared)) {
        (Some(f), Some(name))
            if *f != selection.candidate.format && selection.candidate.format != "dense" =>
        {
            let mut again = args.clone();
            again
                .formats
                .push(format!("{name}={}", selection.candidate.format));
            cmd_eval::prepare(&again)?
        }
        _ => prepared,
    };
    Ok(Resolved {
        prepared,
        recipe: Some(selection.candidate.recipe.clone()),
        selection: Some(selection),
        trial_compile,
    })
}

/// The automatic choice's trial of `list` (the selector's short list, its pick first:
/// [`sparsile::tune::trial`]) on the inputs of `prepared`, re-read in a candidate's
/// format where it names another: the winner, how many others it was timed against, and
/// how its kernel was got. `None` without a trial.
fn settle(
    args: &EvalArgs,
    prepared: &Prepared,
    list: &[sparsile::tune::space::Candidate],
    threads: usize,
) -> Option<(
    sparsile::tune::space::Candidate,
    usize,
    Option<sparsile_runtime::CompileInfo>,
)> {
    let (current, name) = (sparse_format(prepared), sparse_name(prepared));
    let options = sparsile::RunOptions {
        threads: Some(threads),
        params: prepared.params.clone(),
        ..sparsile::RunOptions::default()
    };
    // The operand in the candidate's format: the prepared inputs, or read again.
    let operands = |c: &sparsile::tune::space::Candidate| {
        if current.as_deref() == Some(c.format.as_str()) {
            return Some((prepared.text.clone(), prepared.inputs.clone()));
        }
        let mut again = args.clone();
        again
            .formats
            .push(format!("{}={}", name.as_ref()?, c.format));
        let p = cmd_eval::prepare(&again).ok()?;
        Some((p.text, p.inputs))
    };
    sparsile::auto::trial_run::settle_list(list, operands, &options)
        .map(|s| (s.candidate, s.others, s.kernel.compile_info().cloned()))
}

/// [`resolve`] for a GPU target: a named recipe or trace as given, else the GPU rule's
/// recipe for the operator (the operand keeps its format).
pub fn resolve_gpu(prepared: Prepared, recipe: Option<&str>, has_schedule: bool) -> Resolved {
    let recipe = match recipe {
        _ if has_schedule => None,
        Some(r) if r != "auto" => Some(r.to_string()),
        _ => Some(format!(
            "{} (the GPU rule)",
            sparsile::auto::gpu_rule_on(&prepared.program, &prepared.inputs)
        )),
    };
    Resolved {
        prepared,
        recipe,
        selection: None,
        trial_compile: None,
    }
}

/// The recipe spec of a [`Resolved::recipe`] (without the note of how it was chosen).
pub fn spec(recipe: &str) -> &str {
    recipe.split(" (").next().unwrap_or(recipe)
}

/// The name and format of the one sparse input.
fn sparse_input(prepared: &Prepared) -> Option<(&String, String)> {
    let mut sparse = prepared
        .inputs
        .iter()
        .filter(|(_, t)| t.structure.axes.iter().any(|a| a.kind.is_sparse()));
    let (name, t) = sparse.next()?;
    sparse
        .next()
        .is_none()
        .then(|| (name, t.format().to_string()))
}

fn sparse_format(prepared: &Prepared) -> Option<String> {
    sparse_input(prepared).map(|(_, f)| f)
}

fn sparse_name(prepared: &Prepared) -> Option<String> {
    sparse_input(prepared).map(|(n, _)| n.clone())
}

/// `rowwise (chosen by the selector)`, for reports.
pub fn describe(recipe: Option<&str>, selection: Option<&Selection>, has_schedule: bool) -> String {
    match (recipe, selection, has_schedule) {
        (_, _, true) => "trace".to_string(),
        (Some(r), Some(s), _) => {
            let note = s
                .note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default();
            format!(
                "{}, {r} (chosen by the {}{note})",
                s.candidate.format,
                s.source.name()
            )
        }
        (Some(r), None, _) => r.to_string(),
        (None, _, _) => "default".to_string(),
    }
}
