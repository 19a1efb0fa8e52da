//! One `hermes doctor` row: ✓, ⚠ or ✗, what was found and what to do about it.

use serde::Serialize;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but something should be looked at.
    Warn,
    /// Broken; `doctor` exits 1.
    Fail,
}

impl Status {
    /// ✓, ⚠ or ✗.
    pub fn symbol(self) -> &'static str {
        match self {
            Status::Ok => "✓",
            Status::Warn => "⚠",
            Status::Fail => "✗",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Outcome.
    pub status: Status,
    /// What was found, one line.
    pub message: String,
    /// What to do about it, one line (for ⚠ and ✗).
    pub fix: Option<String>,
}

impl Check {
    /// A passing check.
    pub fn ok(message: impl Into<String>) -> Self {
        Check {
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }
    /// A warning with its fix.
    pub fn warn(message: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Warn,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
    /// A failure with its fix.
    pub fn fail(message: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Fail,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `hermes doctor --json` and the dashboard's API serve this shape; pinned here.
    #[test]
    fn a_check_serializes_as_doctor_json_shows_it() {
        assert_eq!(
            serde_json::to_value(Check::fail("broken", "mend it")).unwrap(),
            serde_json::json!({ "status": "fail", "message": "broken", "fix": "mend it" })
        );
        assert_eq!(
            serde_json::to_value(Check::ok("fine")).unwrap(),
            serde_json::json!({ "status": "ok", "message": "fine", "fix": null })
        );
        assert_eq!(Check::warn("w", "f").status.symbol(), "⚠");
    }
}
