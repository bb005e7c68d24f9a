//! The SVG plot of a run (or of several targets' runs of one scenario): latency over time on
//! top, the percentile curve below.
//!
//! Time series show p50 and p99 of each measured second, so a stall or a slow start is
//! visible, not averaged away. The percentile curve puts quantiles on a "nines" axis
//! (0.9 → 1, 0.99 → 2, 0.999 → 3, ...), where a tail stands out instead of being squeezed
//! against the right edge.

use std::path::Path;

use plotters::prelude::*;

use crate::report::{Curve, Report, SeriesPoint};

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 820;

/// The highest quantile the percentile axis shows (five nines).
const MAX_NINES: f64 = 5.0;

/// Writes the plot of `runs` (target name, report) to `path`.
pub fn write(path: &Path, runs: &[(String, &Report)]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(HEIGHT / 2);
    let title = runs
        .first()
        .and_then(|(_, report)| serde_json::to_value(report.scenario.kind).ok())
        .and_then(|kind| kind.as_str().map(str::to_owned))
        .unwrap_or_default();
    over_time(&top, &title, runs)?;
    percentiles(&bottom, runs)?;
    root.present()?;
    Ok(())
}

/// The series a plot shows for a report: event latencies, or request latencies for a
/// scenario without events (feed).
fn shown_series(report: &Report) -> Vec<String> {
    let mut names: Vec<String> = report
        .series
        .iter()
        .map(|point| point.series.clone())
        .collect();
    names.sort();
    names.dedup();
    if names.iter().any(|name| name.starts_with("event ")) {
        names.retain(|name| name.starts_with("event "));
    }
    names
}

fn shown_curves(report: &Report) -> Vec<&Curve> {
    let events: Vec<&Curve> = report
        .curves
        .iter()
        .filter(|curve| curve.name.starts_with("event "))
        .collect();
    if events.is_empty() {
        report.curves.iter().collect()
    } else {
        events
    }
}

fn ms(us: u64) -> f64 {
    us.max(1) as f64 / 1000.0
}

/// A log axis range covering `values` (ms), rounded out to powers of ten.
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (mut low, mut high) = (f64::MAX, f64::MIN);
    for value in values {
        low = low.min(value);
        high = high.max(value);
    }
    if low > high {
        return 0.01..10.0;
    }
    let low = 10f64.powf(low.max(0.001).log10().floor());
    let high = 10f64.powf(high.max(low * 10.0).log10().ceil());
    low..high
}

fn label(run: &str, series: &str, runs: usize) -> String {
    if runs > 1 {
        format!("{run}: {series}")
    } else {
        series.to_owned()
    }
}

fn over_time<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    runs: &[(String, &Report)],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let points: Vec<&SeriesPoint> = runs
        .iter()
        .flat_map(|(_, report)| {
            let shown = shown_series(report);
            report
                .series
                .iter()
                .filter(move |point| shown.contains(&point.series))
        })
        .collect();
    let seconds = points
        .iter()
        .map(|point| point.second + 1)
        .max()
        .unwrap_or(1);
    let range = log_range(
        points
            .iter()
            .flat_map(|point| [ms(point.p50_us), ms(point.p99_us)]),
    );
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{title}: latency per second (p50 solid, p99 dashed)"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..seconds as f64, range.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("seconds after the warm-up")
        .y_desc("ms")
        .draw()?;
    let mut color_index = 0;
    for (run, report) in runs {
        for series in shown_series(report) {
            let color = Palette99::pick(color_index).to_rgba();
            color_index += 1;
            let mine: Vec<&SeriesPoint> = report
                .series
                .iter()
                .filter(|point| point.series == series)
                .collect();
            let p50 = mine
                .iter()
                .map(|point| (point.second as f64 + 0.5, ms(point.p50_us)));
            chart
                .draw_series(LineSeries::new(p50, color.stroke_width(2)))?
                .label(label(run, &series, runs.len()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            let p99: Vec<(f64, f64)> = mine
                .iter()
                .map(|point| (point.second as f64 + 0.5, ms(point.p99_us)))
                .collect();
            chart.draw_series(DashedLineSeries::new(p99, 6, 4, color.stroke_width(1)))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Where quantile `q` sits on the nines axis.
fn nines(q: f64) -> f64 {
    (-(1.0 - q).max(1e-9).log10()).min(MAX_NINES)
}

fn percentiles<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    runs: &[(String, &Report)],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let range = log_range(runs.iter().flat_map(|(_, report)| {
        shown_curves(report)
            .into_iter()
            .flat_map(|curve| curve.points.iter().map(|&(_, us)| ms(us)))
    }));
    let mut chart = ChartBuilder::on(area)
        .caption("latency by percentile, whole run", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..MAX_NINES, range.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("ms")
        .x_labels(6)
        .x_label_formatter(&|x| percentile_label(*x))
        .draw()?;
    let mut color_index = 0;
    for (run, report) in runs {
        for curve in shown_curves(report) {
            let color = Palette99::pick(color_index).to_rgba();
            color_index += 1;
            // The maximum (q = 1) has no place on a nines axis; it is in the table.
            let points = curve
                .points
                .iter()
                .filter(|(q, _)| *q < 1.0)
                .map(|&(q, us)| (nines(q), ms(us)));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(label(run, &curve.name, runs.len()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// "0%", "90%", "99%", "99.9%", ... for whole nines.
fn percentile_label(nines: f64) -> String {
    let whole = nines.round() as i32;
    if (nines - f64::from(whole)).abs() > 1e-6 {
        return String::new();
    }
    if whole == 0 {
        return "0%".to_owned();
    }
    let percent = 100.0 * (1.0 - 10f64.powi(-whole));
    format!("{percent:.*}%", (whole - 2).max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nines_axis_is_labelled_in_percent() {
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(5.0), "99.999%");
        assert_eq!(percentile_label(2.5), "");
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn log_ranges_round_out_to_powers_of_ten() {
        let range = log_range([0.35, 12.0].into_iter());
        assert!((range.start - 0.1).abs() < 1e-12 && (range.end - 100.0).abs() < 1e-9);
        assert_eq!(log_range(std::iter::empty()), 0.01..10.0);
    }
}
