//! Plain-text tables and colours for the terminal, and sandlot's own notes on stderr,
//! which `--quiet` silences.

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences `note!` for the rest of the process (`-q`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Like `eprintln!`, for what sandlot says about its own work (progress, where a run
/// went, what it removed): silent under `-q`. Errors and warnings are not notes.
macro_rules! note {
    ($($arg:tt)*) => {
        if !$crate::cli::output::quiet() {
            eprintln!($($arg)*);
        }
    };
}

use sandlot::Severity;
use std::fmt;

/// A table with left-aligned columns, sized to its widest cell.
pub struct Table<const N: usize> {
    header: [String; N],
    rows: Vec<[String; N]>,
}

impl<const N: usize> Table<N> {
    pub fn new(header: [&str; N]) -> Self {
        Table {
            header: header.map(str::to_string),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, row: [String; N]) {
        self.rows.push(row);
    }
}

impl<const N: usize> fmt::Display for Table<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths = self.header.each_ref().map(|h| h.chars().count());
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
                if i + 1 == N {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  "));
                }
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// The severity as a fixed-width word, coloured when `color`.
pub fn severity(severity: Severity, color: bool) -> String {
    let word = format!("{severity:<8}");
    if !color {
        return word;
    }
    let code = match severity {
        Severity::Info => "2",
        Severity::Low => "36",
        Severity::Medium => "33",
        Severity::High => "31",
        Severity::Critical => "1;31",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

/// `yes` or `no`.
pub fn yes_no(value: bool) -> String {
    if value { "yes" } else { "no" }.into()
}

/// The items joined with `, `, or `(none)`.
pub fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".into()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut table = Table::new(["A", "B"]);
        table.row(["long cell".into(), "x".into()]);
        assert_eq!(table.to_string(), "A          B\nlong cell  x\n");
    }
}
