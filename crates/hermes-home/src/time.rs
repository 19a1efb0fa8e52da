//! Timestamps in the formats the original's files use.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Now as ISO-8601 UTC with seconds, e.g. `2026-05-20T10:11:12Z` (`updated_at` fields).
pub fn iso_utc_now() -> String {
    let now = OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| OffsetDateTime::now_utc());
    now.format(&Rfc3339)
        .unwrap_or_else(|_| now.unix_timestamp().to_string())
}

/// Now as `YYYYmmddTHHMMSSZ`, for file names (`auth.json.corrupt.<ts>`, trash folders).
pub fn compact_utc_now() -> String {
    let now = OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// Now as Python's `datetime.now(timezone.utc).isoformat()`:
/// `2026-05-20T10:11:12.123456+00:00`.
pub fn python_iso_utc_now() -> String {
    python_iso(OffsetDateTime::now_utc())
}

/// A UTC time as Python's `datetime.isoformat()` writes it.
pub fn python_iso(t: OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_have_the_expected_shape() {
        let iso = super::iso_utc_now();
        assert_eq!(iso.len(), 20, "{iso}");
        assert!(iso.ends_with('Z'));
        let compact = super::compact_utc_now();
        assert_eq!(compact.len(), 16, "{compact}");
        assert_eq!(&compact[8..9], "T");
    }
}
