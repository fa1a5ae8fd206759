//! `sparsile tune corpus`: the selector's training corpus, generated from seeds (no real
//! data), listed as a table or written as Matrix Market files.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sparsile::formats::mtx::{self, MtxData, MtxField, MtxWriteOptions};
use sparsile::tune::corpus::{corpus_of, families, CorpusMatrix, CorpusSpec};

use crate::output::{out, outln};
use crate::table::{thousands, Table};

#[derive(clap::Args)]
pub struct CorpusArgs {
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Write every matrix as NAME.mtx into this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Which corpus: seed, scale, members per family, and which families.
#[derive(clap::Args, Clone)]
pub struct SpecArgs {
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// 1 is full size (up to ~150,000 rows); CI uses about 0.05.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    #[arg(long, default_value_t = 8)]
    pub per_family: usize,
    /// Only these families (comma-separated; default: all). A family's members do not
    /// depend on which others are generated.
    #[arg(long, value_delimiter = ',')]
    pub family: Vec<String>,
}

impl SpecArgs {
    pub fn spec(&self) -> CorpusSpec {
        CorpusSpec {
            seed: self.seed,
            scale: self.scale,
            per_family: self.per_family,
        }
    }

    /// `seed=S scale=X per_family=N[ families=a,b]`, for provenance.
    pub fn describe(&self) -> String {
        let mut d = format!(
            "seed={} scale={} per_family={}",
            self.seed, self.scale, self.per_family
        );
        if !self.family.is_empty() {
            d.push_str(&format!(" families={}", self.family.join(",")));
        }
        d
    }

    /// The corpus's matrices of the chosen families; an unknown family is an error
    /// that lists the known ones.
    pub fn matrices(&self) -> Result<Vec<CorpusMatrix>> {
        let known: Vec<&str> = families().iter().map(|(f, _)| *f).collect();
        if let Some(bad) = self.family.iter().find(|f| !known.contains(&f.as_str())) {
            bail!(
                "unknown corpus family `{bad}` (known: {})",
                known.join(", ")
            );
        }
        Ok(corpus_of(&self.spec(), |family| {
            self.family.is_empty() || self.family.iter().any(|f| f == family)
        }))
    }
}

pub fn run(args: &CorpusArgs) -> Result<()> {
    let matrices = args.spec.matrices()?;
    let mut t = Table::new(
        &["name", "family", "shape", "nnz", "parameters"],
        &[false, false, true, true, false],
    );
    for m in &matrices {
        t.row(vec![
            m.name.clone(),
            m.family.to_string(),
            format!("{} x {}", m.coo.shape[0], m.coo.shape[1]),
            thousands(m.coo.nnz() as u64),
            m.params.clone(),
        ]);
        if let Some(dir) = &args.out {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let path = dir.join(format!("{}.mtx", m.name));
            mtx::write_path(
                &path,
                &MtxData::Sparse(m.coo.clone()),
                &MtxWriteOptions::general(MtxField::Real),
            )
            .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    out!("{}", t.render());
    let total: usize = matrices.iter().map(|m| m.coo.nnz()).sum();
    outln!(
        "{} matrices, {} non-zeros ({})",
        matrices.len(),
        thousands(total as u64),
        args.spec.describe()
    );
    for (f, d) in families() {
        outln!("  {f}: {d}");
    }
    Ok(())
}
