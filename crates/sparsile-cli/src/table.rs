//! Plain-text tables with aligned columns, for command output people read.

use std::fmt::Write;

/// A table of rows of cells; the first row is the header.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    right_align: Vec<bool>,
}

impl Table {
    /// A table with these column headers; `right` marks numeric (right-aligned) columns.
    pub fn new(headers: &[&str], right: &[bool]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
            right_align: right.to_vec(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders with two spaces between columns and a rule under the header.
    pub fn render(&self) -> String {
        let ncols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..ncols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let headless = self.rows[0].iter().all(String::is_empty);
        for (i, row) in self.rows.iter().enumerate() {
            if i == 0 && headless {
                continue;
            }
            let mut line = String::new();
            for (c, w) in widths.iter().enumerate() {
                let cell = row.get(c).map(String::as_str).unwrap_or("");
                let pad = w - cell.chars().count();
                if c > 0 {
                    line.push_str("  ");
                }
                if self.right_align.get(c).copied().unwrap_or(false) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
            if i == 0 {
                let total: usize = widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1);
                let _ = writeln!(out, "{}", "-".repeat(total));
            }
        }
        out
    }
}

/// Formats a count with thousands separators: `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Formats a duration in seconds with a sensible unit.
pub fn duration(secs: f64) -> String {
    if secs < 1e-3 {
        format!("{:.1} µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.2} ms", secs * 1e3)
    } else {
        format!("{secs:.2} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&["name", "n"], &[false, true]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long".into(), "100".into()]);
        assert_eq!(t.render(), "name    n\n---------\na       1\nlong  100\n");
    }

    #[test]
    fn empty_header_is_left_out() {
        let mut t = Table::new(&["", ""], &[false, true]);
        t.row(vec!["nnz".into(), "12".into()]);
        assert_eq!(t.render(), "nnz  12\n");
    }

    #[test]
    fn formats_numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(100), "100");
        assert_eq!(duration(0.0123), "12.30 ms");
    }
}
