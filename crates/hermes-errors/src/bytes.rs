//! Byte sizes as operators write and read them: `memory_max: 1GiB`, `memory limit: 1.3 GiB`.
//!
//! One rule for every crate that takes or shows a size (a service's memory limit, a backup's
//! size, the volume's free space), so `512M` means the same in `config.yaml`, the environment
//! and the dashboard.

/// Parses a size: a number of bytes (`1048576`), or a number with a unit — `K`/`KB`/`KiB`,
/// `M`, `G`, `T` (any case; the units are powers of 1024, as for container memory limits:
/// Docker's `--memory 1g` and Kubernetes' `1Gi` are both 2^30), optionally with a space and a
/// fraction (`1.5 GiB`).
///
/// # Errors
/// What is wrong, lowercase: an empty value, an unknown unit, zero, or too large.
pub fn parse(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim();
    let bad = || format!("`{text}` is not a size (a number of bytes, or one like `512MiB`, `1G`)");
    if number.is_empty() {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" | "ki" => 10,
        "m" | "mb" | "mib" | "mi" => 20,
        "g" | "gb" | "gib" | "gi" => 30,
        "t" | "tb" | "tib" | "ti" => 40,
        _ => return Err(bad()),
    };
    let bytes = value * (1u64 << shift) as f64;
    if bytes < 1.0 {
        return Err(format!(
            "`{text}` is zero; give a size of at least one byte"
        ));
    }
    if bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
}

/// A size as people read it: `512 B`, `3.4 MiB`, `1 GiB` (a whole number of units is said
/// without a fraction, so a limit reads as it was written).
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else if n.is_multiple_of(1u64 << (10 * unit)) {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_the_spellings_operators_use() {
        assert_eq!(parse("1048576"), Ok(1 << 20));
        assert_eq!(parse("1GiB"), Ok(1 << 30));
        assert_eq!(parse("1g"), Ok(1 << 30));
        assert_eq!(parse("1Gi"), Ok(1 << 30));
        assert_eq!(parse("512 MiB"), Ok(512 << 20));
        assert_eq!(parse("1.5G"), Ok(3 << 29));
        assert_eq!(parse(" 64k "), Ok(64 << 10));
        for bad in ["", "G", "1 parsec", "-1G", "1.2.3M", "0", "0.0001B"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(parse("99999999T").unwrap_err().contains("too large"));
    }

    #[test]
    fn sizes_read_as_written() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1 << 30), "1 GiB");
        assert_eq!(human((13 << 30) / 10), "1.3 GiB");
        assert_eq!(human(3 * 1024 * 1024 + 400 * 1024), "3.4 MiB");
        assert_eq!(human(parse("256MiB").unwrap()), "256 MiB");
    }
}
