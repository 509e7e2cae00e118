//! One colour per release method, used by every chart and the HTML table, so `del` is the
//! same red everywhere.

use plotters::style::RGBColor;

/// The colour of a release method (or any variant name): `del` red, `token` blue, `delex`
/// purple; other names get a stable colour from a small fallback set.
pub(crate) fn method_colour(name: &str) -> RGBColor {
    // A variant on one server of a compare across servers keeps its method's colour.
    let name = name.split('@').next().unwrap_or(name);
    match name {
        "del" => RGBColor(214, 39, 40),
        "token" => RGBColor(31, 119, 180),
        "delex" => RGBColor(148, 103, 189),
        // The variants of profiles/fencing.toml, distinct on one chart.
        "token+fence" => RGBColor(255, 127, 14),
        "token+fence-rw" => RGBColor(44, 160, 44),
        "token+extend" => RGBColor(140, 86, 75),
        "token+extend+fence-rw" => RGBColor(23, 190, 207),
        "token+extend+fence" => RGBColor(227, 119, 194),
        other => {
            const FALLBACK: [RGBColor; 4] = [
                RGBColor(44, 160, 44),
                RGBColor(255, 127, 14),
                RGBColor(140, 86, 75),
                RGBColor(23, 190, 207),
            ];
            let h = other
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            FALLBACK[h % FALLBACK.len()]
        }
    }
}

/// [`method_colour`] as CSS `#rrggbb`.
pub(crate) fn method_hex(name: &str) -> String {
    let RGBColor(r, g, b) = method_colour(name);
    format!("#{r:02x}{g:02x}{b:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three methods have their documented, distinct colours; unknown names are stable.
    #[test]
    fn method_colours() {
        assert_eq!(method_hex("del"), "#d62728");
        assert_eq!(method_hex("token"), "#1f77b4");
        assert_eq!(method_hex("delex"), "#9467bd");
        assert_eq!(method_colour("fencing"), method_colour("fencing"));
        let fencing = [
            "del",
            "token",
            "token+fence",
            "token+fence-rw",
            "token+extend",
            "token+extend+fence-rw",
        ];
        let mut hexes: Vec<String> = fencing.iter().map(|n| method_hex(n)).collect();
        hexes.sort();
        hexes.dedup();
        assert_eq!(
            hexes.len(),
            fencing.len(),
            "one colour per variant of fencing.toml"
        );
    }
}
