//! `sparsile cache info|clear`: what the kernel cache holds, and removing the compiled
//! kernels from it (`sparsile_runtime::jit::{cache_info, clear_cache}` do the work).
//!
//! ```text
//! sparsile cache info [--json]
//! sparsile cache clear [--json]
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use sparsile_ir::settings::Settings;
use sparsile_runtime::jit::{cache_info, clear_cache, CacheInfo, ClearReport};

use crate::output::{out, outln};
use crate::table::{thousands, Table};

#[derive(clap::Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub sub: CacheSub,
}

#[derive(clap::Subcommand)]
pub enum CacheSub {
    /// Show the cache folder, its kernels, their size and age, and whether the folder
    /// passes the cache's ownership and permission checks.
    Info(CacheCmdArgs),
    /// Remove the compiled kernels (objects, sources, records, logs) from the cache; the
    /// tuning database and anything else in the folder stay.
    Clear(CacheCmdArgs),
}

#[derive(clap::Args)]
pub struct CacheCmdArgs {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CacheArgs) -> Result<()> {
    let settings = Settings::from_env();
    match &args.sub {
        CacheSub::Info(a) => {
            let info = cache_info(&settings).context("cannot list the kernel cache")?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&info_json(&info))?);
            } else {
                out!("{}", render_info(&info));
            }
        }
        CacheSub::Clear(a) => {
            let report = clear_cache(&settings).context("cannot clear the kernel cache")?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&clear_json(&report))?);
            } else {
                out!("{}", render_clear(&report));
            }
        }
    }
    Ok(())
}

fn info_json(info: &CacheInfo) -> serde_json::Value {
    serde_json::json!({
        "dir": info.dir.display().to_string(),
        "exists": info.exists,
        "checks_pass": info.exists && info.problem.is_none(),
        "problem": info.problem,
        "kernels": info.kernels(),
        "cpu_kernels": info.cpu_kernels,
        "cuda_kernels": info.cuda_kernels,
        "files": info.files,
        "bytes": info.bytes,
        "oldest": info.oldest.map(epoch_seconds),
        "newest": info.newest.map(epoch_seconds),
        "skipped": info.skipped,
    })
}

fn clear_json(report: &ClearReport) -> serde_json::Value {
    serde_json::json!({
        "dir": report.dir.display().to_string(),
        "kernels_removed": report.kernels_removed,
        "files_removed": report.files_removed,
        "bytes_removed": report.bytes_removed,
        "skipped": report.skipped,
    })
}

fn render_info(info: &CacheInfo) -> String {
    let checks = match (&info.problem, info.exists) {
        (_, false) => "the folder does not exist yet (created 0700 on the first compile)".into(),
        (None, true) => "pass (a folder only you can write)".to_string(),
        (Some(p), true) => format!("FAIL: {p}; the cache refuses this folder"),
    };
    let mut table = Table::new(&["property", "value"], &[false, false]);
    table.row(vec!["folder".into(), info.dir.display().to_string()]);
    table.row(vec!["checks".into(), checks]);
    table.row(vec![
        "CPU kernels".into(),
        thousands(info.cpu_kernels as u64),
    ]);
    table.row(vec![
        "CUDA kernels".into(),
        thousands(info.cuda_kernels as u64),
    ]);
    table.row(vec!["files".into(), thousands(info.files as u64)]);
    table.row(vec!["size".into(), size(info.bytes)]);
    table.row(vec!["oldest kernel".into(), when(info.oldest)]);
    table.row(vec!["newest kernel".into(), when(info.newest)]);
    if info.skipped > 0 {
        table.row(vec![
            "skipped".into(),
            format!(
                "{} (named like cache files, but links or not your regular files)",
                info.skipped
            ),
        ]);
    }
    table.render()
}

fn render_clear(report: &ClearReport) -> String {
    let mut text = format!(
        "removed {} {}: {} files, {}, from {}\n",
        thousands(report.kernels_removed as u64),
        if report.kernels_removed == 1 {
            "kernel"
        } else {
            "kernels"
        },
        thousands(report.files_removed as u64),
        size(report.bytes_removed),
        report.dir.display()
    );
    if report.skipped > 0 {
        text.push_str(&format!(
            "left {} entries named like cache files that are links or not your regular files\n",
            report.skipped
        ));
    }
    text
}

/// `1,234 bytes`, or `12,345,678 bytes (11.8 MiB)`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut text = format!("{} bytes", thousands(bytes));
    if bytes >= 1024 {
        let mut value = bytes as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        text.push_str(&format!(" ({value:.1} {})", UNITS[unit]));
    }
    text
}

fn epoch_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `2026-11-26 04:28:25 UTC`, or `-`.
fn when(t: Option<SystemTime>) -> String {
    let Some(t) = t else {
        return "-".into();
    };
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_sizes_read_as_people_write_them() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_795_667_305);
        assert_eq!(when(Some(t)), "2026-11-26 04:28:25 UTC");
        assert_eq!(when(None), "-");
        assert_eq!(size(512), "512 bytes");
        assert_eq!(size(3 * 1024 * 1024), "3,145,728 bytes (3.0 MiB)");
    }
}
