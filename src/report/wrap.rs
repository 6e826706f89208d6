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

fn hang(body: &str) -> usize {
    match body.find(": ") {
        Some(p) if columns(&body[..p]) < 40 => columns(&body[..p]) + 2,
        _ => body.len() - body.trim_start_matches(' ').len() + 4,
    }
}

fn wrap_line(body: &str, out: &mut String) {
    let indent = " ".repeat(hang(body));
    let lead = body.len() - body.trim_start_matches(' ').len();
    let mut cur = body[..lead].to_owned();
    let rest = &body[lead..];
    // Items set apart by two spaces (a latency line's `p99 3.087  p99.9 n/a (needs ...)`) stay whole
    // where they fit; otherwise the line breaks between words.
    let sep = if rest.contains("  ") { "  " } else { " " };
    let mut words = false;
    for unit in rest.split(sep).filter(|u| !u.is_empty()) {
        place(unit, sep, &indent, &mut cur, &mut words, out);
    }
    out.push_str(cur.trim_end());
}

/// Puts `unit` on the current line after `sep`, or on a new one when that gains room; a unit wider
/// than a new line's room goes word by word.
fn place(
    unit: &str,
    sep: &str,
    indent: &str,
    cur: &mut String,
    words: &mut bool,
    out: &mut String,
) {
    let room = WIDTH.saturating_sub(columns(indent));
    if sep != " " && columns(unit) > room {
        for word in unit.split(' ').filter(|w| !w.is_empty()) {
            place(word, if *words { " " } else { "" }, indent, cur, words, out);
        }
        return;
    }
    let sep = if *words { sep } else { "" };
    let gains = columns(indent) < columns(cur) + columns(sep);
    if *words && gains && columns(cur) + columns(sep) + columns(unit) > WIDTH {
        out.push_str(cur.trim_end());
        out.push('\n');
        cur.clear();
        cur.push_str(indent);
    } else {
        cur.push_str(sep);
    }
    cur.push_str(unit);
    *words = true;
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
