//! Progress bars on stderr, drawn only on a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-counting bar; hidden with `quiet` or when stderr is not a terminal.
pub fn bytes_bar(total: Option<u64>, quiet: bool, message: &'static str) -> ProgressBar {
    let bar = match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::new_spinner(),
    };
    let template = if total.is_some() {
        "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} {eta}"
    } else {
        "{msg} {spinner} {bytes} {bytes_per_sec}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    let visible = !quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
    bar.set_draw_target(if visible {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    bar
}
