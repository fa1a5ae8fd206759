//! The tuning database: eight processes appending at once lose and tear no record; a
//! corrupted line is skipped with a warning naming it; a record being written (no
//! newline yet) is not read until complete; the newest `best` record of a key wins,
//! also when another handle appended it.

use std::io::Write;
use std::process::Command;

use sparsile_tune::db::{Db, Key, Record};
use sparsile_tune::space::Candidate;

const CHILD: &str = "SPARSILE_TUNE_DB_TEST_CHILD";
const RECORDS_PER_CHILD: usize = 200;

fn key(pattern: &str) -> Key {
    Key {
        pattern: pattern.to_string(),
        ..Key::example()
    }
}

/// In a child process: append records to the file named by the environment.
#[test]
fn child_appends_records() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (path, id) = spec.split_once('|').unwrap();
    let db = Db::open(std::path::Path::new(path));
    for n in 0..RECORDS_PER_CHILD {
        let mut r = Record::new(
            key(&format!("child{id}")),
            "spmm",
            Candidate::new("csr", format!("rowwise:prefetch={n}")),
            vec![n as f64; 5],
        );
        // Long lines make torn writes likely if writes were not atomic.
        r.features = vec![id.parse::<f64>().unwrap(); 300];
        db.append(&r).unwrap();
    }
}

#[test]
fn eight_processes_append_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.jsonl");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..8)
        .map(|id| {
            Command::new(&exe)
                .args(["child_appends_records", "--exact", "--nocapture"])
                .env(CHILD, format!("{}|{id}", path.display()))
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let db = Db::open(&path);
    let records = db.records().unwrap();
    assert_eq!(db.warnings().unwrap(), Vec::<String>::new());
    assert_eq!(records.len(), 8 * RECORDS_PER_CHILD);
    for id in 0..8 {
        let mine: Vec<&Record> = records
            .iter()
            .filter(|r| r.key.pattern == format!("child{id}"))
            .collect();
        assert_eq!(mine.len(), RECORDS_PER_CHILD, "child {id}");
        assert!(mine
            .iter()
            .all(|r| r.features.iter().all(|f| *f == id as f64)));
    }
}

#[test]
fn a_corrupted_line_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.jsonl");
    let db = Db::open(&path);
    let mut good = Record::new(
        key("a"),
        "spmv",
        Candidate::new("csr", "rowwise"),
        vec![1.0],
    );
    good.best = true;
    db.append(&good).unwrap();
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "{{\"key\": \"not a record\"").unwrap();
        writeln!(f, "\u{0}\u{1}garbage").unwrap();
    }
    let mut later = Record::new(
        key("b"),
        "spmv",
        Candidate::new("csr", "default"),
        vec![2.0],
    );
    later.best = true;
    db.append(&later).unwrap();
    let fresh = Db::open(&path);
    assert_eq!(fresh.records().unwrap().len(), 2);
    let warnings = fresh.warnings().unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("line 2 skipped"), "{warnings:?}");
    assert_eq!(
        fresh.best(&key("b")).unwrap().unwrap().candidate.recipe,
        "default"
    );
}

#[test]
fn a_record_being_written_is_read_when_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.jsonl");
    let db = Db::open(&path);
    let mut r = Record::new(
        key("a"),
        "spmm",
        Candidate::new("csr", "rowwise"),
        vec![1.0],
    );
    r.best = true;
    let line = serde_json::to_string(&r).unwrap();
    let (head, tail) = line.split_at(line.len() / 2);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(head.as_bytes()).unwrap();
    assert!(db.best(&key("a")).unwrap().is_none());
    assert!(db.warnings().unwrap().is_empty());
    f.write_all(tail.as_bytes()).unwrap();
    f.write_all(b"\n").unwrap();
    assert_eq!(db.best(&key("a")).unwrap().unwrap(), r);
}

#[test]
fn the_newest_best_wins() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("tuning.jsonl"));
    for (t, recipe) in [(10, "rowwise"), (30, "daspmm"), (20, "default")] {
        let mut r = Record::new(key("k"), "spmm", Candidate::new("csr", recipe), vec![1.0]);
        r.best = true;
        r.timestamp = t;
        db.append(&r).unwrap();
    }
    // Not `best`: never an answer.
    let other = Record::new(key("k"), "spmm", Candidate::new("csr", "hyb"), vec![0.1]);
    db.append(&other).unwrap();
    for n in 0..2000 {
        let r = Record::new(
            key(&format!("x{n}")),
            "spmm",
            Candidate::new("csr", "rowwise"),
            vec![1.0],
        );
        db.append(&r).unwrap();
    }
    assert_eq!(
        db.best(&key("k")).unwrap().unwrap().candidate.recipe,
        "daspmm"
    );
    // Records appended since the last read are picked up.
    let mut newest = Record::new(
        key("k"),
        "spmm",
        Candidate::new("csr", "hyb:c=1,k=2"),
        vec![1.0],
    );
    newest.best = true;
    newest.timestamp = 40;
    db.append(&newest).unwrap();
    assert_eq!(
        db.best(&key("k")).unwrap().unwrap().candidate.recipe,
        "hyb:c=1,k=2"
    );
}

/// A record written before the kernels' version was part of the key (no
/// `kernel_version`) is read without a warning but answers no lookup: it was measured on
/// older kernels.
#[test]
fn records_of_older_kernels_are_read_but_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.jsonl");
    let db = Db::open(&path);
    let mut old = Record::new(
        key("a"),
        "spmm",
        Candidate::new("csr", "rowwise"),
        vec![1.0],
    );
    old.best = true;
    let mut line = serde_json::to_value(&old).unwrap();
    line["key"]
        .as_object_mut()
        .unwrap()
        .remove("kernel_version")
        .expect("the key names its kernels' version");
    std::fs::write(&path, format!("{line}\n")).unwrap();
    assert_eq!(db.records().unwrap().len(), 1);
    assert!(db.warnings().unwrap().is_empty());
    assert_eq!(db.records().unwrap()[0].key.kernel_version, 0);
    assert!(db.best(&key("a")).unwrap().is_none());
    db.append(&old).unwrap();
    assert_eq!(
        db.best(&key("a")).unwrap().unwrap().key.kernel_version,
        sparsile_tune::space::KERNEL_VERSION
    );
}
