//! Encoding one metric of a scrape (`encode`): a counter, a gauge, a histogram, or a family
//! of labelled series.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::histogram::HistogramSnapshot;

/// What encoding a metric gives: an error only when the text cannot be written.
pub(super) type Result2 = Result<(), std::fmt::Error>;

pub(super) fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result2 {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(metric)
}

pub(super) fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result2 {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// A metric with one labelled series per entry.
pub(super) fn family<'a, L: prometheus_client::encoding::EncodeLabelSet + 'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    series: impl IntoIterator<Item = (L, Value)>,
) -> Result2 {
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in series {
        let encoder = metric.encode_family(&labels)?;
        match value {
            Value::Count(count) => ConstCounter::new(count).encode(encoder)?,
            Value::Seconds(seconds) => ConstCounter::new(seconds).encode(encoder)?,
            Value::Level(level) => ConstGauge::new(level).encode(encoder)?,
            Value::Gauge(gauge) => ConstGauge::new(gauge).encode(encoder)?,
        }
    }
    Ok(())
}

/// A counter with one series per value of one label, `counts` in the order of `values`.
pub(super) fn counters_by(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: impl IntoIterator<Item = &'static str>,
    counts: &[u64],
) -> Result2 {
    let series = values.into_iter().enumerate().map(|(index, value)| {
        let count = counts.get(index).copied().unwrap_or(0);
        ([(label, value)], Value::Count(count))
    });
    family(encoder, name, help, MetricType::Counter, series)
}

/// One series' value, typed as its metric is.
pub(super) enum Value {
    Count(u64),
    Seconds(f64),
    Level(i64),
    Gauge(f64),
}

pub(super) fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    snapshot: &HistogramSnapshot,
) -> Result2 {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
        snapshot.sum_seconds(),
        snapshot.count(),
        &snapshot.buckets(),
        None,
    )
}

pub(super) fn level(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
