//! Writing command output to stdout. A closed pipe (`sparsile info big.mtx | head`)
//! ends the program quietly instead of panicking as `println!` would.

use std::io::{ErrorKind, Write};

/// Writes `text` to stdout; exits with status 0 if the reader has gone away.
pub fn write_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let result = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    if let Err(e) = result {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(&format!($($arg)*))
    };
}

/// `println!` through [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::output::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(&format!("{}\n", format!($($arg)*)))
    };
}

pub(crate) use {out, outln};
