//! Prometheus's text exposition format, as the gateway's and the dashboard's `/metrics` write
//! it: one writer for the header lines, samples and label escaping, so the two never differ.

use std::fmt::Write;

/// The `# HELP` and `# TYPE` lines of the family `name` (`kind`: `counter`, `gauge`,
/// `histogram`).
pub fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A gauge of one unlabelled sample: its header and `name value`.
pub fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {value}");
}

/// A label value as the text format requires: backslash, double quote and newline escaped.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_is_written_as_the_text_format_wants() {
        let mut out = String::new();
        gauge(&mut out, "x_ready", "Whether x is ready.", 1.0);
        assert_eq!(
            out,
            "# HELP x_ready Whether x is ready.\n# TYPE x_ready gauge\nx_ready 1\n"
        );
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }
}
