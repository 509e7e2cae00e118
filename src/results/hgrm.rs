//! `<metric>.hgrm`: HdrHistogram percentile distributions (values in ms), one per metric and
//! variant, in the layout HdrHistogram's own tools print.

use super::write_file;
use crate::record::{HistSet, Metric};
use hdrhistogram::Histogram;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes a histogram (µs) as an HdrHistogram percentile distribution with values in ms.
pub fn write_hgrm<W: Write>(mut w: W, h: &Histogram<u64>) -> io::Result<()> {
    writeln!(
        w,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    if h.is_empty() {
        writeln!(
            w,
            "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
            0.0, 0.0
        )?;
        writeln!(w, "#[Max     = {:>12.3}, Total count    = {:>12}]", 0.0, 0)?;
        return Ok(());
    }
    let mut count = 0;
    for v in h.iter_quantiles(5) {
        count += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = v.value_iterated_to() as f64 / 1000.0;
        if q < 1.0 {
            writeln!(
                w,
                "{value:>12.3} {q:>14.12} {count:>10} {:>14.2}",
                1.0 / (1.0 - q)
            )?;
        } else {
            writeln!(w, "{value:>12.3} {q:>14.12} {count:>10}")?;
        }
    }
    writeln!(
        w,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    )?;
    writeln!(
        w,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / 1000.0,
        h.len()
    )?;
    Ok(())
}

/// Writes every metric's `.hgrm` for `hists`, suffixed by variant when `suffix` is set.
pub fn write_hgrms(
    dir: &Path,
    hists: &HistSet,
    suffix: Option<&str>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for m in Metric::ALL {
        let name = match suffix {
            Some(s) => format!("{}-{s}.hgrm", m.file_stem()),
            None => format!("{}.hgrm", m.file_stem()),
        };
        let path = dir.join(name);
        write_file(&path, |w| Ok(write_hgrm(w, hists.get(m))?))?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hgrm text is the standard percentile layout with values in ms and the right totals.
    #[test]
    fn hgrm_has_standard_layout() {
        let mut h = crate::record::new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut out = Vec::new();
        write_hgrm(&mut out, &h).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().next().unwrap().contains("Percentile"));
        assert!(text.contains("Total count    =         1000"), "{text}");
        let last_value_line = text
            .lines()
            .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
            .unwrap();
        let v: f64 = last_value_line
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((v - 1000.0).abs() / 1000.0 < 0.001, "{v}");
    }
}
