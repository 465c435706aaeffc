//! Reading counters and histograms out of Prometheus text (kube-scheduler's and placer's `/metrics`): the
//! difference between two scrapes, its mean and interpolated quantiles.

use std::collections::BTreeMap;

/// One histogram summed over every series matching a name and label filter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Cumulative counts by upper bound (`+Inf` as `f64::INFINITY`).
    pub buckets: Vec<(f64, f64)>,
    /// The sum of the observations.
    pub sum: f64,
    /// The number of observations.
    pub count: f64,
}

/// `name{labels} value` split into its parts; `None` for comments and malformed lines.
fn sample(line: &str) -> Option<(&str, BTreeMap<&str, &str>, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    let labels = labels
        .split("\",")
        .filter_map(|pair| {
            let (k, v) = pair.split_once("=\"")?;
            Some((k.trim_start_matches(','), v.trim_end_matches('"')))
        })
        .collect();
    Some((name, labels, value))
}

/// The counter or gauge `name` in `text`, summed over the series whose labels include every
/// `(key, value)` of `filter`; 0 when absent.
pub fn counter(text: &str, name: &str, filter: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(sample)
        .filter(|(series, labels, _)| {
            *series == name && filter.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .map(|(_, _, value)| value)
        .sum()
}

impl Histogram {
    /// The histogram `name` (without `_bucket`/`_sum`/`_count`) in `text`, summed over the
    /// series whose labels include every `(key, value)` of `filter`. Empty when absent.
    pub fn parse(text: &str, name: &str, filter: &[(&str, &str)]) -> Self {
        let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        let mut h = Self::default();
        for (series, labels, value) in text.lines().filter_map(sample) {
            let Some(suffix) = series.strip_prefix(name) else {
                continue;
            };
            if !filter.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                continue;
            }
            match suffix {
                "_sum" => h.sum += value,
                "_count" => h.count += value,
                "_bucket" => {
                    let le = match labels.get("le") {
                        Some(&"+Inf") => f64::INFINITY,
                        Some(le) => le.parse().unwrap_or(f64::INFINITY),
                        None => continue,
                    };
                    buckets.entry(le.to_bits()).or_insert((le, 0.0)).1 += value;
                }
                _ => {}
            }
        }
        h.buckets = buckets.into_values().collect();
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        h
    }

    /// `self - earlier`: the observations between two scrapes of one process.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        let before = |le: f64| {
            earlier
                .buckets
                .iter()
                .find(|(l, _)| *l == le)
                .map_or(0.0, |(_, c)| *c)
        };
        Self {
            buckets: self
                .buckets
                .iter()
                .map(|(le, c)| (*le, c - before(*le)))
                .collect(),
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        }
    }

    /// The largest finite bucket bound: a quantile equal to it lies at or above it.
    pub fn top_bound(&self) -> Option<f64> {
        self.buckets
            .iter()
            .rev()
            .map(|(le, _)| *le)
            .find(|le| le.is_finite())
    }

    /// The mean observation, `None` without observations.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The `q` quantile, linearly interpolated inside its bucket (as Prometheus'
    /// `histogram_quantile`); the largest finite bound when it falls in `+Inf`.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for &(le, count) in &self.buckets {
            if count >= rank {
                if le.is_infinite() {
                    return Some(lower);
                }
                let width = (count - below).max(f64::MIN_POSITIVE);
                return Some(lower + (le - lower) * (rank - below) / width);
            }
            (lower, below) = (le, count);
        }
        Some(lower)
    }
}

#[cfg(test)]
mod tests {
    use super::{Histogram, counter};

    const TEXT: &str = r#"# HELP x_seconds x
x_seconds_bucket{profile="a",le="0.001"} 1
x_seconds_bucket{profile="a",le="0.01"} 3
x_seconds_bucket{profile="a",le="+Inf"} 4
x_seconds_sum{profile="a"} 0.5
x_seconds_count{profile="a"} 4
x_seconds_bucket{profile="b",le="0.001"} 7
x_seconds_bucket{profile="b",le="+Inf"} 7
x_seconds_sum{profile="b"} 0.001
x_seconds_count{profile="b"} 7
"#;

    #[test]
    fn filters_sums_and_interpolates() {
        let a = Histogram::parse(TEXT, "x_seconds", &[("profile", "a")]);
        assert_eq!(a.count, 4.0);
        assert_eq!(a.mean(), Some(0.125));
        // Rank 2 of 4 lies halfway through the (0.001, 0.01] bucket.
        let p50 = a.quantile(0.5).expect("observations");
        assert!((p50 - 0.0055).abs() < 1e-9, "{p50}");
        // Rank 3.96 falls in +Inf: the largest finite bound.
        assert_eq!(a.quantile(0.99), Some(0.01));
        assert_eq!(a.top_bound(), Some(0.01));
        let all = Histogram::parse(TEXT, "x_seconds", &[]);
        assert_eq!(all.count, 11.0);
        assert_eq!(all.since(&a).count, 7.0);
        assert_eq!(Histogram::parse(TEXT, "y", &[]).quantile(0.5), None);
    }

    #[test]
    fn counters_sum_matching_series_only() {
        let text = "# TYPE a_total counter\na_total{result=\"x\",p=\"1\"} 2\na_total{result=\"x\",p=\"2\"} 3\na_total{result=\"y\"} 7\na_total_other 9\n";
        assert_eq!(counter(text, "a_total", &[("result", "x")]), 5.0);
        assert_eq!(counter(text, "a_total", &[]), 12.0);
        assert_eq!(counter(text, "b_total", &[]), 0.0);
    }
}
