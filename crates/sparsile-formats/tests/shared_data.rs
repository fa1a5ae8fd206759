//! Loads every Matrix Market file of the shared data set (the `shared/data` folder
//! beside the repository) and checks it against its header and the README table.
//!
//! Skips (passing) when the folder is missing, unless `SPARSILE_REQUIRE_DATA=1`.
//! `SPARSILE_DATA_DIR` overrides the folder (both variables are read through
//! `sparsile_ir::settings`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use sparsile_formats::mtx::{self, MtxData, MtxFormat, MtxReadOptions, MtxSymmetry};
use sparsile_ir::settings::Settings;

fn settings() -> Settings {
    Settings::from_env()
}

fn data_dir() -> PathBuf {
    settings().data_dir_or(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// Facts of one README table row: rows, cols, nnz, max row nnz.
#[derive(Debug, Clone, Copy)]
struct Facts {
    rows: usize,
    cols: usize,
    nnz: usize,
    max_row: usize,
}

fn number(cell: &str) -> Option<usize> {
    cell.trim().replace(',', "").parse().ok()
}

/// Table rows look like `` | `name.mtx` | kind | rows | cols | nnz | density | max row nnz | ...``.
fn readme_facts(text: &str) -> HashMap<String, Facts> {
    let mut facts = HashMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 9 || !cells[1].starts_with('`') {
            continue;
        }
        let name = cells[1].trim_matches('`').to_string();
        if let (Some(rows), Some(cols), Some(nnz), Some(max_row)) = (
            number(cells[3]),
            number(cells[4]),
            number(cells[5]),
            number(cells[7]),
        ) {
            facts.insert(
                name,
                Facts {
                    rows,
                    cols,
                    nnz,
                    max_row,
                },
            );
        }
    }
    facts
}

#[test]
fn every_shared_matrix_loads_and_matches_its_header_and_the_readme() {
    let dir = data_dir();
    let required = settings().require_data;
    if !dir.is_dir() {
        assert!(
            !required,
            "SPARSILE_REQUIRE_DATA=1 but {} is missing",
            dir.display()
        );
        println!("skipping: no shared data folder at {}", dir.display());
        return;
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
    let facts = readme_facts(&readme);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the data folder is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".mtx") || name.ends_with(".mtx.gz")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .mtx files in {}", dir.display());
    let mut largest: Option<(u64, String, f64)> = None;
    let mut checked_against_readme = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let start = Instant::now();
        let (header, data) = mtx::read_path_with_header(path, &MtxReadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let seconds = start.elapsed().as_secs_f64();
        assert_eq!(header.format, MtxFormat::Coordinate, "{name}");
        assert_eq!(header.symmetry, MtxSymmetry::General, "{name}");
        let MtxData::Sparse(coo) = &data else {
            panic!("{name}: a coordinate file gave dense data")
        };
        assert_eq!(coo.shape, vec![header.rows, header.cols], "{name}");
        assert_eq!(coo.nnz(), header.entries, "{name}: nnz vs size line");
        coo.check_ranges().unwrap();
        let mut row_len = vec![0usize; header.rows];
        for e in 0..coo.nnz() {
            row_len[coo.coords[2 * e]] += 1;
        }
        let max_row = row_len.iter().copied().max().unwrap_or(0);
        if let Some(f) = facts.get(&name) {
            assert_eq!(
                (header.rows, header.cols),
                (f.rows, f.cols),
                "{name}: shape vs README"
            );
            assert_eq!(coo.nnz(), f.nnz, "{name}: nnz vs README");
            assert_eq!(max_row, f.max_row, "{name}: max row nnz vs README");
            checked_against_readme += 1;
        } else if !facts.is_empty() {
            panic!("{name} is not in the README table");
        }
        let entries = coo.nnz() as u64;
        if largest.as_ref().is_none_or(|(n, _, _)| entries > *n) {
            largest = Some((entries, name.clone(), seconds));
        }
    }
    println!(
        "loaded {} files ({} checked against the README table)",
        files.len(),
        checked_against_readme
    );
    if let Some((nnz, name, seconds)) = largest {
        println!("largest: {name} ({nnz} entries) loaded in {seconds:.3} s");
    }
}
