//! Progress display for long work: a spinner on a terminal, silence otherwise
//! (and always silence under `--json`, so machine-readable output stays clean).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner with a message, shown only when stderr is a terminal and `enabled`.
pub fn spinner(enabled: bool, message: impl Into<String>) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("valid template"),
    );
    bar.set_message(message.into());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A bar of `len` steps with a message, shown only when stderr is a terminal and
/// `enabled`.
pub fn bar(enabled: bool, len: u64) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed}, ETA {eta})")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
