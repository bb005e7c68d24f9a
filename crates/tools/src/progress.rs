//! Progress bars on stderr, drawn only on a terminal and never with `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-counting bar that clears its line when dropped, whether its command ended well or
/// with an error, so that no stale line is left above what is printed next.
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar on stderr; hidden with `quiet` or when stderr is not a terminal.
    pub fn bytes(total: Option<u64>, quiet: bool, message: &'static str) -> Progress {
        let visible = !quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Progress::to(total, message, target)
    }

    /// A bar drawn to `target`, which it is given at birth: a bar made with the default
    /// target draws its first frame there at once ("0 B") before it could be hidden.
    fn to(total: Option<u64>, message: &'static str, target: ProgressDrawTarget) -> Progress {
        let bar = ProgressBar::with_draw_target(total, target);
        let template = if total.is_some() {
            "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} {eta}"
        } else {
            "{msg} {spinner} {bytes} {bytes_per_sec}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message);
        Progress(bar)
    }

    pub fn bar(&self) -> &ProgressBar {
        &self.0
    }

    /// Clears the bar now, before a message that should not share its line.
    pub fn clear(&self) {
        self.0.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::TermLike;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A terminal that records what is drawn on it: the text of each line, and clears.
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<Vec<String>>>);

    impl Screen {
        fn record(&self, what: String) -> std::io::Result<()> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .push(what);
            Ok(())
        }

        fn drawn(&self) -> Vec<String> {
            self.0.lock().map(|drawn| drawn.clone()).unwrap_or_default()
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, line: &str) -> std::io::Result<()> {
            self.record(line.to_owned())
        }
        fn write_str(&self, text: &str) -> std::io::Result<()> {
            self.record(text.to_owned())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.record("<clear>".to_owned())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_dropped_bar_leaves_its_line_clear_even_after_an_error() {
        let screen = Screen::default();
        let attempt = || -> std::io::Result<()> {
            let progress = Progress::to(
                None,
                "exporting",
                ProgressDrawTarget::term_like(Box::new(screen.clone())),
            );
            progress
                .bar()
                .wrap_write(std::io::sink())
                .write_all(b"12345")?;
            progress.bar().tick();
            Err(std::io::Error::other("the export failed half way"))
        };
        assert!(attempt().is_err());
        let drawn = screen.drawn();
        assert!(
            drawn.iter().any(|text| text.contains("exporting")),
            "{drawn:?}"
        );
        assert_eq!(
            drawn.last().map(String::as_str),
            Some("<clear>"),
            "{drawn:?}"
        );
    }
}
