//! A progress bar for `-a` sweeps that hides itself unless stdout and stderr are terminals the user
//! watches (`report::term`), so that piped or redirected output (what scripts parse) carries only the
//! report.

use super::term::{self, Stream};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress over the message sizes of a sweep; printing through it keeps rows and bar apart.
pub(crate) struct SweepProgress {
    bar: ProgressBar,
}

impl SweepProgress {
    /// A bar over `sizes` steps, drawn on stderr only when both stdout and stderr are terminals.
    pub(crate) fn new(sizes: u64) -> SweepProgress {
        let visible = term::interactive(Stream::Stdout) && term::interactive(Stream::Stderr);
        Self::with_visibility(sizes, visible)
    }

    /// A bar that never draws (tests, or when the binary knows better).
    pub(crate) fn hidden(sizes: u64) -> SweepProgress {
        Self::with_visibility(sizes, false)
    }

    /// A bar over `steps` steps named `unit` ("runs"), drawn as [`SweepProgress::new`] decides, with
    /// a ticking clock so that one long step still shows life.
    pub(crate) fn steps(steps: u64, unit: &str) -> SweepProgress {
        let visible = term::interactive(Stream::Stdout) && term::interactive(Stream::Stderr);
        let p = Self::styled(steps, visible, unit, 20);
        if visible {
            p.bar
                .enable_steady_tick(std::time::Duration::from_millis(250));
        }
        p
    }

    fn with_visibility(sizes: u64, visible: bool) -> SweepProgress {
        Self::styled(sizes, visible, "sizes", 30)
    }

    fn styled(sizes: u64, visible: bool, unit: &str, bar_width: u16) -> SweepProgress {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(sizes), target);
        // The template is well-formed by construction; fall back to the default style rather than fail.
        let template = format!(
            " {{spinner}} [{{bar:{bar_width}}}] {{pos}}/{{len}} {unit}  {{msg}}  ({{elapsed}})"
        );
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        SweepProgress { bar }
    }

    /// Whether the bar draws anything.
    pub(crate) fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Announces the size being measured now.
    pub(crate) fn start_size(&self, size: u64) {
        self.bar.set_message(format!("measuring {size} B"));
    }

    /// Announces the step being run now.
    pub(crate) fn start_step(&self, msg: String) {
        self.bar.set_message(msg);
    }

    /// Counts one size as done.
    pub(crate) fn finish_size(&self) {
        self.bar.inc(1);
    }

    /// Sizes done so far.
    #[cfg(test)]
    fn done(&self) -> u64 {
        self.bar.position()
    }

    /// Prints `text` (whole lines, as the console functions return them) to stdout without tearing the bar.
    pub(crate) fn print(&self, text: &str) {
        self.bar.suspend(|| print!("{text}"));
    }

    /// Removes the bar from the screen.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for SweepProgress {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_bar_counts_sizes() {
        let p = SweepProgress::hidden(3);
        assert!(p.is_hidden());
        for size in [2, 4, 8] {
            p.start_size(size);
            p.finish_size();
        }
        assert_eq!(p.done(), 3);
        p.finish();
    }

    #[test]
    fn bar_is_hidden_when_stdout_is_not_a_terminal() {
        // Under `cargo test` stdout is captured or piped, never a terminal.
        if !term::interactive(Stream::Stdout) {
            assert!(SweepProgress::new(5).is_hidden());
        }
    }
}
