//! Console lines kept within [`WIDTH`] columns: a long line breaks at spaces, and its continuations
//! line up under its value (after a ` Key : ` or `roceperf: ` prefix), so that a terminal of 100
//! columns, a CI log or a mail shows each line whole.

/// The widest console line roceperf prints (perftest's latency table excepted: its layout is kept).
pub(crate) const WIDTH: usize = 100;

/// Columns `s` takes on a terminal, a tab reaching the next multiple of 8.
pub(crate) fn columns(s: &str) -> usize {
    s.chars()
        .fold(0, |c, ch| if ch == '\t' { (c / 8 + 1) * 8 } else { c + 1 })
}

/// `text` with each line longer than [`WIDTH`] broken at spaces. A continuation is indented to the
/// value of a ` Key : value` or `name: value` line (the first `: ` in its first 40 columns), else to
/// the line's own indent and 4 more. A word wider than the room is left whole.
pub(crate) fn wrap(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if columns(body) <= WIDTH {
            out.push_str(line);
            continue;
        }
        wrap_line(body, &mut out);
        out.push_str(newline);
    }
    out
}

/// Where a line's value starts (in bytes), and the columns its continuations are indented by.
fn hang(body: &str) -> (usize, usize) {
    match body.find(": ") {
        Some(p) if columns(&body[..p]) < 40 => (p + 2, columns(&body[..p]) + 2),
        _ => {
            let lead = body.len() - body.trim_start_matches(' ').len();
            (lead, lead + 4)
        }
    }
}

fn wrap_line(body: &str, out: &mut String) {
    let (value, hang) = hang(body);
    let mut line = Line {
        cur: body[..value].to_owned(),
        floor: value,
        indent: " ".repeat(hang),
        words: false,
    };
    // The key (` Key             : `) stays as it is, its padding included.
    let rest = &body[value..];
    // Items set apart by two spaces (a latency line's `p99 3.087  p99.9 n/a (needs ...)`) stay whole
    // where they fit; otherwise the line breaks between words.
    let sep = if rest.contains("  ") { "  " } else { " " };
    for unit in rest.split(sep).filter(|u| !u.is_empty()) {
        line.place(unit, sep, out);
    }
    out.push_str(line.cur.trim_end());
}

/// The line being filled: its text, the part of it that stays (its key or indent), the indent of
/// the next, and whether it holds a word yet.
struct Line {
    cur: String,
    floor: usize,
    indent: String,
    words: bool,
}

fn starts_with_digit(s: &str) -> bool {
    s.trim_start().starts_with(|c: char| c.is_ascii_digit())
}

impl Line {
    /// Puts `unit` on the current line after `sep`, or on a new one when that gains room; a unit
    /// wider than a new line's room goes word by word.
    fn place(&mut self, unit: &str, sep: &str, out: &mut String) {
        let room = WIDTH.saturating_sub(columns(&self.indent));
        if sep != " " && columns(unit) > room {
            for word in unit.split(' ').filter(|w| !w.is_empty()) {
                self.place(word, " ", out);
            }
            return;
        }
        let sep = if self.words { sep } else { "" };
        let gains = columns(&self.indent) < columns(&self.cur) + columns(sep);
        if self.words && gains && columns(&self.cur) + columns(sep) + columns(unit) > WIDTH {
            self.break_before(unit, out);
        } else {
            self.cur.push_str(sep);
        }
        self.cur.push_str(unit);
        self.words = true;
    }

    /// Ends the current line before `unit`. A continuation never starts with a digit, as perftest's
    /// result rows do (a script that takes such a line for a row would misread it): words move down
    /// with `unit` until the new line starts with one that is not a number.
    fn break_before(&mut self, unit: &str, out: &mut String) {
        let mut carry = String::new();
        if starts_with_digit(unit) {
            let keep = self.cur.clone();
            loop {
                let trimmed = self.cur.trim_end().len();
                self.cur.truncate(trimmed);
                match self.cur[self.floor..].rfind(' ').map(|i| i + self.floor) {
                    Some(at) if at > self.floor => {
                        let word = self.cur[at + 1..].to_owned();
                        self.cur.truncate(at);
                        carry = format!("{word} {carry}");
                        if !starts_with_digit(&word) {
                            break;
                        }
                    }
                    // Nothing left to move: the unit starts the line after all.
                    _ => {
                        self.cur = keep;
                        carry.clear();
                        break;
                    }
                }
            }
        }
        out.push_str(self.cur.trim_end());
        out.push('\n');
        self.cur.clone_from(&self.indent);
        self.floor = self.indent.len();
        self.cur.push_str(&carry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_break_under_their_value() {
        let why = format!(" {:<16}: {}\n", "Why", "word ".repeat(40).trim_end());
        let w = wrap(&why);
        let lines: Vec<&str> = w.lines().collect();
        assert!(lines.len() > 1 && w.ends_with('\n'), "{w}");
        assert!(lines.iter().all(|l| columns(l) <= WIDTH), "{w}");
        assert!(lines[1].starts_with(&" ".repeat(19)) && lines[1].as_bytes()[19] == b'w');
        // Nothing lost: the words are the same.
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&w), words(&why));
        // A short line, a tabbed one and a word wider than the room are left as they are.
        let short = " Dual-port       : OFF\t\tDevice         : lo\n";
        assert_eq!(wrap(short), short);
        let wide = format!("roceperf: {}\n", "x".repeat(120));
        assert_eq!(wrap(&wide), wide);
        let stderr = format!("roceperf: {}", "note ".repeat(30));
        assert!(
            wrap(&stderr)
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("          note")
        );
    }
}
