//! Scheduled snapshots: when they run, where they go, how many are kept, and one run.
//!
//! * [`Schedule`] — `hourly` (`0 * * * *`), `daily` (`0 0 * * *`) or a five-field cron
//!   expression, `minute hour day-of-month month day-of-week`, always in UTC. A field is `*`, a
//!   value, a range `a-b`, a step `*/n` or `a-b/n`, or a list of those (`1,15-20,*/30`);
//!   months may be named `jan`..`dec` and weekdays `sun`..`sat` (any case), weekdays run 0-7
//!   with both 0 and 7 Sunday. As in cron, when both day fields are restricted (neither begins
//!   with `*`) a day matching either runs: `0 0 1 * mon` is the 1st of each month *and* every
//!   Monday. [`Schedule::next_after`] is the next minute that matches.
//! * [`BackupSettings`] — the root `config.yaml`'s `backup:` (`schedule`, `keep`, `dir`), each
//!   overridden by its environment variable ([`SCHEDULE_VAR`], [`KEEP_VAR`], [`DIR_VAR`]: Helm,
//!   compose); `keep` defaults to [`DEFAULT_KEEP`], `dir` to `$HERMES_HOME/backups`.
//! * Scheduled archives are named `hermes-backup-<UTC %Y%m%d-%H%M%S>.zip` ([`archive_name`]).
//!   [`prune`] deletes the oldest files of exactly that form beyond `keep`, and never anything
//!   else in the directory; [`run_once`] prunes only after a new archive was written and
//!   verified.
//! * What the last run did and when the next is due is [`State`], in [`STATE_FILE`] in `dir`,
//!   written atomically: `hermes service status` shows it under the `backup` service.

use std::fmt;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use hermes_home::config::Config;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

use crate::select::{self, Scope};
use crate::{Identity, verify};

/// `config.yaml`'s key for the schedule (the service layer's, which decides whether the
/// `backup` service runs at all).
pub const SCHEDULE_KEY: &str = hermes_services::backup_schedule::SCHEDULE_KEY;
/// `config.yaml`'s key for how many scheduled archives are kept.
pub const KEEP_KEY: &str = "backup.keep";
/// `config.yaml`'s key for where they are written.
pub const DIR_KEY: &str = "backup.dir";
/// Overrides [`SCHEDULE_KEY`] (the service layer's, as the key).
pub const SCHEDULE_VAR: &str = hermes_services::backup_schedule::SCHEDULE_VAR;
/// Overrides [`KEEP_KEY`].
pub const KEEP_VAR: &str = "HERMES_BACKUP_KEEP";
/// Overrides [`DIR_KEY`].
pub const DIR_VAR: &str = "HERMES_BACKUP_DIR";
/// `config.yaml`'s key for whether a start restores a damaged database from the newest sound
/// copy in the backup directory (`crate::check`); on unless set false.
pub const RESTORE_CORRUPT_KEY: &str = "backup.restore_corrupt";
/// Overrides [`RESTORE_CORRUPT_KEY`].
pub const RESTORE_CORRUPT_VAR: &str = "HERMES_BACKUP_RESTORE_CORRUPT";
/// `config.yaml`'s key for deflating databases in scheduled archives too
/// ([`crate::Compression::Small`]); off unless set true.
pub const COMPRESS_KEY: &str = "backup.compress";
/// Overrides [`COMPRESS_KEY`].
pub const COMPRESS_VAR: &str = "HERMES_BACKUP_COMPRESS";
/// How many scheduled archives are kept when `keep` is not set (the original's default).
pub const DEFAULT_KEEP: usize = 3;
/// The default directory, relative to `HERMES_HOME` (a backup never holds it).
pub const DEFAULT_DIR: &str = "backups";
/// The state file in the backup directory.
pub const STATE_FILE: &str = ".schedule.json";

const ARCHIVE_PREFIX: &str = "hermes-backup-";
const ARCHIVE_SUFFIX: &str = ".zip";

/// What the forms of a field are, for the error of a bad one.
const FORMS: &str = "`*`, lists `a,b`, ranges `a-b`, steps `*/n` and `a-b/n`";

/// Why a schedule's text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`: {problem}")]
pub struct ParseError {
    /// The text given.
    pub text: String,
    /// What is wrong, naming the field and what it allows.
    pub problem: String,
}

/// What can go wrong reading the backup settings, or keeping the state and the archives of
/// scheduled backups.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The schedule is not `hourly`, `daily` or a cron expression.
    #[error("invalid backup schedule in {origin}")]
    Schedule {
        /// Where it came from (`HERMES_BACKUP_SCHEDULE`, `backup.schedule` in `…/config.yaml`).
        origin: String,
        /// What is wrong.
        #[source]
        source: ParseError,
    },

    /// `keep` is not a whole number of 1 or more.
    #[error("invalid backup keep `{value}` in {origin}: it must be a whole number, 1 or more")]
    Keep {
        /// The value given.
        value: String,
        /// Where it came from.
        origin: String,
    },

    /// A switch (`restore_corrupt`, `compress`) is not a yes or a no.
    #[error("invalid `{key}` `{value}` in {origin}: it must be true or false")]
    Switch {
        /// The dotted key.
        key: &'static str,
        /// The value given.
        value: String,
        /// Where it came from.
        origin: String,
    },

    /// A key of `backup:` is a list or a mapping.
    #[error("`{key}` in `{}` must be a single value", path.display())]
    NotScalar {
        /// The dotted key.
        key: &'static str,
        /// The `config.yaml`.
        path: PathBuf,
    },

    /// The directory is inside the volume where a backup would hold it, so every archive
    /// would hold the ones before it.
    #[error("the backup directory `{}` (from {origin}) is inside the volume, where backups would include it", dir.display())]
    DirBackedUp {
        /// The directory.
        dir: PathBuf,
        /// Where it came from.
        origin: String,
    },

    /// A file or directory of scheduled backups could not be read, written or removed.
    #[error("could not {action} `{}`", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },

    /// The state file is not ours (not JSON of the expected shape).
    #[error("`{}` is not a backup schedule state file", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },

    /// `config.yaml` could not be read, or the state file written.
    #[error(transparent)]
    Home(#[from] hermes_home::Error),
}

impl Error {
    fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// The "what to do" line for this error, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Schedule { .. } => Some(
                "use `hourly`, `daily`, or five cron fields in UTC — minute hour day-of-month month day-of-week — e.g. `30 2 * * *` for 02:30 every day"
                    .into(),
            ),
            Error::Keep { .. } => Some(format!(
                "set how many scheduled archives to keep, e.g. `keep: 3` (the default is {DEFAULT_KEEP})"
            )),
            Error::Switch { key, .. } => Some(format!(
                "write `{}: true` or `{}: false` under `backup:`",
                key.trim_start_matches("backup."),
                key.trim_start_matches("backup.")
            )),
            Error::NotScalar { key, .. } => Some(format!(
                "write `{key}` as one value, e.g. `schedule: daily`, `keep: 3`, `dir: /backups`"
            )),
            Error::DirBackedUp { .. } => Some(format!(
                "use a directory named `backups` on the volume (the default, `$HERMES_HOME/{DEFAULT_DIR}`), or one outside it"
            )),
            Error::Io { path, .. } => Some(format!(
                "check that `{}` exists and is writable by the user the `backup` service runs as",
                path.display()
            )),
            Error::State { path, .. } => Some(format!(
                "remove `{}`; the next run writes it again",
                path.display()
            )),
            Error::Home(e) => e.hint(),
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Schedule { .. } => Error::Schedule {
        origin: "`backup.schedule` in `/opt/data/config.yaml`".into(),
        source: ParseError {
            text: "61 * * * *".into(),
            problem: format!("minute `61` is out of range (allowed: 0-59, {FORMS})"),
        },
    },
    Error::Keep { .. } => Error::Keep {
        value: "0".into(),
        origin: format!("`{KEEP_VAR}`"),
    },
    Error::Switch { .. } => Error::Switch {
        key: RESTORE_CORRUPT_KEY,
        value: "maybe".into(),
        origin: format!("`{RESTORE_CORRUPT_VAR}`"),
    },
    Error::NotScalar { .. } => Error::NotScalar {
        key: SCHEDULE_KEY,
        path: "/opt/data/config.yaml".into(),
    },
    Error::DirBackedUp { .. } => Error::DirBackedUp {
        dir: "/opt/data/snapshots".into(),
        origin: "`backup.dir` in `/opt/data/config.yaml`".into(),
    },
    Error::Io { .. } => Error::io(
        "create",
        "/opt/data/backups",
        std::io::Error::from_raw_os_error(nix::libc::EACCES),
    ),
    Error::State { .. } => Error::State {
        path: "/opt/data/backups/.schedule.json".into(),
        source: serde_json::from_str::<State>("[").err().unwrap_or_else(|| {
            serde_json::Error::io(std::io::Error::other("unexpected end of input"))
        }),
    },
    Error::Home(_) => Error::Home(hermes_home::Error::NoHome),
});

/// One field of a cron expression: its name, its range and its names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    /// Names of the values from `min` on (`jan` is 1, `sun` is 0).
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAY: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl Field {
    /// What the field allows, for its errors.
    fn allowed(&self) -> String {
        let names = match (self.names.first(), self.names.last()) {
            (Some(first), Some(last)) => format!(" or {first}..{last}"),
            _ => String::new(),
        };
        let sunday = if self.max == 7 {
            " (0 and 7 are Sunday)"
        } else {
            ""
        };
        format!("allowed: {}-{}{names}{sunday}, {FORMS}", self.min, self.max)
    }

    fn problem(&self, what: impl fmt::Display) -> String {
        format!("{} {what} ({})", self.name, self.allowed())
    }

    fn value(&self, text: &str) -> Result<u32, String> {
        if let Some(i) = self.names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
            return Ok(self.min + i as u32);
        }
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.problem(format_args!("`{text}` is not a number")));
        }
        match text.parse::<u32>() {
            Ok(v) if (self.min..=self.max).contains(&v) => Ok(v),
            _ => Err(self.problem(format_args!("`{text}` is out of range"))),
        }
    }

    /// The values `text` selects as bits, and whether the field is restricted (does not begin
    /// with `*`, cron's rule for the two day fields).
    fn parse(&self, text: &str) -> Result<(u64, bool), String> {
        let mut bits = 0u64;
        for item in text.split(',') {
            if item.is_empty() {
                return Err(self.problem(format_args!("`{text}` has an empty list item")));
            }
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => {
                    let n = match step.parse::<u32>() {
                        Ok(n) if n >= 1 && n <= self.max => n,
                        _ => {
                            return Err(self.problem(format_args!(
                                "step `/{step}` in `{item}` is not 1-{}",
                                self.max
                            )));
                        }
                    };
                    (range, Some(n))
                }
                None => (item, None),
            };
            let (low, high) = if range == "*" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(self.problem(format_args!("range `{range}` runs backwards")));
                }
                (a, b)
            } else {
                let v = self.value(range)?;
                if step.is_some() {
                    return Err(self.problem(format_args!(
                        "`{item}`: a step needs a range, as in `*/n` or `a-b/n`"
                    )));
                }
                (v, v)
            };
            for v in (low..=high).step_by(step.unwrap_or(1) as usize) {
                // Day-of-week 7 is Sunday, as 0.
                let v = if self.max == 7 && v == 7 { 0 } else { v };
                bits |= 1 << v;
            }
        }
        Ok((bits, !text.starts_with('*')))
    }
}

/// When scheduled backups run (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The text given: `hourly`, `daily`, or the five fields with single spaces.
    text: String,
    /// The five fields it stands for.
    expression: String,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    days_restricted: bool,
    weekdays_restricted: bool,
}

/// How far [`Schedule::next_after`] looks: the rarest schedule that runs at all (the 29th of
/// February) runs within 8 years.
const SEARCH_YEARS: i32 = 9;

impl Schedule {
    /// Parses `hourly`, `daily` (with or without a leading `@`) or five cron fields (module doc).
    ///
    /// # Errors
    /// What is wrong, naming the field and what it allows; a schedule that matches no day at
    /// all (`0 0 30 feb *`) is an error too.
    pub fn parse(text: &str) -> Result<Schedule, ParseError> {
        let text = text.trim();
        let fail = |problem: String| ParseError {
            text: text.to_owned(),
            problem,
        };
        let (shown, expression) = match text.trim_start_matches('@').to_ascii_lowercase().as_str() {
            "hourly" => (text.to_owned(), "0 * * * *".to_owned()),
            "daily" => (text.to_owned(), "0 0 * * *".to_owned()),
            _ => {
                let fields = text.split_whitespace().collect::<Vec<_>>().join(" ");
                (fields.clone(), fields)
            }
        };
        let fields: Vec<&str> = expression.split(' ').filter(|f| !f.is_empty()).collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(fail(format!(
                "{} field{}; a schedule is `hourly`, `daily`, or 5 fields: minute hour day-of-month month day-of-week",
                if fields.is_empty() {
                    "no".to_owned()
                } else {
                    fields.len().to_string()
                },
                if fields.len() == 1 { "" } else { "s" },
            )));
        };
        let (minutes, _) = MINUTE.parse(minute).map_err(fail)?;
        let (hours, _) = HOUR.parse(hour).map_err(fail)?;
        let (days, days_restricted) = DAY.parse(day).map_err(fail)?;
        let (months, _) = MONTH.parse(month).map_err(fail)?;
        let (weekdays, weekdays_restricted) = WEEKDAY.parse(weekday).map_err(fail)?;
        let schedule = Schedule {
            text: shown,
            expression: expression.clone(),
            minutes,
            hours,
            days,
            months,
            weekdays,
            days_restricted,
            weekdays_restricted,
        };
        // Only the day of the month can rule out every day (the 30th of February); the
        // weekdays alone, or either day field, always come round.
        if days_restricted && !weekdays_restricted {
            let possible = (1..=12u8).any(|m| {
                let longest = if m == 2 { 29 } else { days_in(2024, m) };
                months & (1 << m) != 0 && (1..=longest).any(|d| days & (1 << d) != 0)
            });
            if !possible {
                return Err(fail(format!(
                    "day-of-month `{day}` never falls in month `{month}`, so it never runs"
                )));
            }
        }
        Ok(schedule)
    }

    /// The text given (`daily`, `30 2 * * *`; the fields with single spaces between them).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The five fields it stands for (`daily` is `0 0 * * *`).
    pub fn expression(&self) -> &str {
        &self.expression
    }

    fn day_matches(&self, date: Date) -> bool {
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().number_days_from_sunday()) != 0;
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => day || weekday,
            (true, false) => day,
            (false, true) => weekday,
            (false, false) => true,
        }
    }

    /// Whether the minute of `t` (in UTC) is one the schedule runs in.
    pub fn matches(&self, t: OffsetDateTime) -> bool {
        let t = t.to_offset(UtcOffset::UTC);
        self.months & (1 << u8::from(t.month())) != 0
            && self.day_matches(t.date())
            && self.hours & (1 << t.hour()) != 0
            && self.minutes & (1 << t.minute()) != 0
    }

    /// The first minute strictly after `after` that the schedule runs in, in UTC; `None` only
    /// past the end of the calendar (year 9999).
    pub fn next_after(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        let after = after.to_offset(UtcOffset::UTC);
        let minute = Time::from_hms(after.hour(), after.minute(), 0).ok()?;
        let mut t =
            PrimitiveDateTime::new(after.date(), minute).checked_add(time::Duration::MINUTE)?;
        let until = after.year().checked_add(SEARCH_YEARS)?;
        while t.year() <= until {
            let date = t.date();
            if self.months & (1 << u8::from(date.month())) == 0 {
                let (year, month) = match date.month() {
                    Month::December => (date.year().checked_add(1)?, Month::January),
                    m => (date.year(), m.next()),
                };
                t = PrimitiveDateTime::new(
                    Date::from_calendar_date(year, month, 1).ok()?,
                    Time::MIDNIGHT,
                );
            } else if !self.day_matches(date) {
                t = PrimitiveDateTime::new(date.next_day()?, Time::MIDNIGHT);
            } else if self.hours & (1 << t.hour()) == 0 {
                t = t
                    .replace_minute(0)
                    .ok()?
                    .checked_add(time::Duration::HOUR)?;
            } else if self.minutes & (1 << t.minute()) == 0 {
                t = t.checked_add(time::Duration::MINUTE)?;
            } else {
                return Some(t.assume_utc());
            }
        }
        None
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text == self.expression {
            write!(f, "{}", self.text)
        } else {
            write!(f, "{} ({})", self.text, self.expression)
        }
    }
}

fn days_in(year: i32, month: u8) -> u8 {
    Month::try_from(month).map(|m| m.length(year)).unwrap_or(31)
}

/// The settings of scheduled backups (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSettings {
    /// When they run; `None` when no schedule is set (no scheduled backups).
    pub schedule: Option<Schedule>,
    /// How many scheduled archives are kept.
    pub keep: usize,
    /// Where they are written.
    pub dir: PathBuf,
    /// Whether a start restores a damaged database from the newest sound copy in `dir`.
    pub restore_corrupt: bool,
    /// How scheduled archives are compressed.
    pub compression: crate::Compression,
}

impl BackupSettings {
    /// Reads the settings of the volume at `root`: its `config.yaml`, then the environment
    /// through `var`.
    ///
    /// # Errors
    /// `config.yaml` that cannot be read, and every invalid setting (each names where it came
    /// from).
    pub fn load(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let config = hermes_settings::config_of(root)?;
        Self::from_config(root, &config, var)
    }

    /// The settings from the root's `config` and the environment through `var` (module doc).
    ///
    /// # Errors
    /// As [`BackupSettings::load`].
    pub fn from_config(
        root: &Path,
        config: &Config,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, Error> {
        let setting = |key: &'static str, env: &str| -> Result<Option<(String, String)>, Error> {
            if let Some(value) = var(env)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
            {
                return Ok(Some((value, format!("`{env}`"))));
            }
            let nested = config
                .raw(key)
                .and_then(|raw| serde_json::to_value(raw).ok())
                .is_some_and(|v| v.is_array() || v.is_object());
            match nested {
                true => Err(Error::NotScalar {
                    key,
                    path: config.path().to_path_buf(),
                }),
                false => Ok(config
                    .string(key, var)
                    .map(|value| (value, format!("`{key}` in `{}`", config.path().display())))),
            }
        };
        let schedule = match setting(SCHEDULE_KEY, SCHEDULE_VAR)? {
            Some((text, origin)) => {
                Some(Schedule::parse(&text).map_err(|source| Error::Schedule { origin, source })?)
            }
            None => None,
        };
        let keep = match setting(KEEP_KEY, KEEP_VAR)? {
            Some((value, origin)) => match value.parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(Error::Keep { value, origin }),
            },
            None => DEFAULT_KEEP,
        };
        let dir = match setting(DIR_KEY, DIR_VAR)? {
            Some((value, origin)) => {
                let dir = root.join(&value);
                if let Ok(rel) = dir.strip_prefix(root) {
                    let probe = Path::new(rel).join(archive_name(OffsetDateTime::UNIX_EPOCH));
                    let probe = probe.to_string_lossy();
                    if select::is_backed_up(&probe) {
                        return Err(Error::DirBackedUp { dir, origin });
                    }
                }
                dir
            }
            None => root.join(DEFAULT_DIR),
        };
        let switch = |key, var, default| -> Result<bool, Error> {
            match setting(key, var)? {
                Some((value, origin)) => match hermes_errors::switch::parse(&value) {
                    Some(on) => Ok(on),
                    None => Err(Error::Switch { key, value, origin }),
                },
                None => Ok(default),
            }
        };
        let restore_corrupt = switch(RESTORE_CORRUPT_KEY, RESTORE_CORRUPT_VAR, true)?;
        let compression = match switch(COMPRESS_KEY, COMPRESS_VAR, false)? {
            true => crate::Compression::Small,
            false => crate::Compression::Fast,
        };
        Ok(BackupSettings {
            schedule,
            keep,
            dir,
            restore_corrupt,
            compression,
        })
    }

    /// The state file in [`BackupSettings::dir`].
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }
}

/// The file name of the scheduled archive made at `t`: `hermes-backup-20261202-101500.zip`.
pub fn archive_name(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{ARCHIVE_PREFIX}{:04}{:02}{:02}-{:02}{:02}{:02}{ARCHIVE_SUFFIX}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Whether `name` is exactly of [`archive_name`]'s form.
pub fn is_archive_name(name: &str) -> bool {
    let Some(stamp) = name
        .strip_prefix(ARCHIVE_PREFIX)
        .and_then(|rest| rest.strip_suffix(ARCHIVE_SUFFIX))
    else {
        return false;
    };
    let bytes = stamp.as_bytes();
    bytes.len() == 15
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// Whether `name` is exactly the form `hermes backup create` gives an archive by default:
/// `hermes-backup-20261202T101500Z.zip`, or `…Z-2.zip` for a second one within that second
/// (`hermes_home::time::compact_utc_now`).
pub fn is_created_name(name: &str) -> bool {
    created_order(name).is_some()
}

/// A `create` archive's place in time: its stamp and its number within that second (1 for
/// none), `None` for any other name.
fn created_order(name: &str) -> Option<(String, u32)> {
    let stem = name
        .strip_prefix(ARCHIVE_PREFIX)?
        .strip_suffix(ARCHIVE_SUFFIX)?;
    let (stamp, n) = match stem.split_once('-') {
        Some((stamp, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (stamp, n.parse().ok()?)
        }
        Some(_) => return None,
        None => (stem, 1),
    };
    let bytes = stamp.as_bytes();
    let stamped = bytes.len() == 16
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 => *b == b'T',
            15 => *b == b'Z',
            _ => b.is_ascii_digit(),
        });
    stamped.then(|| (stamp.to_owned(), n))
}

/// The scheduled archives in `dir` (regular files of [`archive_name`]'s form), oldest first;
/// none when `dir` does not exist.
///
/// # Errors
/// `dir` cannot be listed.
pub fn scheduled_archives(dir: &Path) -> Result<Vec<String>, Error> {
    archives_named(dir, is_archive_name)
}

/// The regular files in `dir` whose name `ours` accepts, oldest first (each name is its UTC
/// time); none when `dir` does not exist.
fn archives_named(dir: &Path, ours: fn(&str) -> bool) -> Result<Vec<String>, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if ours(&name) && entry.file_type().is_ok_and(|t| t.is_file()) {
            names.push(name);
        }
    }
    // The name is the UTC time (and, for `create`'s, its number within the second).
    names.sort_by_key(|name| created_order(name).unwrap_or_else(|| (name.clone(), 1)));
    Ok(names)
}

/// Deletes the oldest scheduled archives in `dir` beyond the newest `keep`; returns the names
/// deleted. Nothing but [`scheduled_archives`] is ever touched.
///
/// # Errors
/// `dir` cannot be listed, or an archive cannot be removed (those before it are gone).
pub fn prune(dir: &Path, keep: usize) -> Result<Vec<String>, Error> {
    prune_named(dir, keep, is_archive_name)
}

/// As [`prune`], for the archives `hermes backup create` names by default
/// ([`is_created_name`]): its `--keep`. Scheduled archives, the dashboard's and any other file
/// are never touched.
///
/// # Errors
/// As [`prune`].
pub fn prune_created(dir: &Path, keep: usize) -> Result<Vec<String>, Error> {
    prune_named(dir, keep, is_created_name)
}

fn prune_named(dir: &Path, keep: usize, ours: fn(&str) -> bool) -> Result<Vec<String>, Error> {
    let archives = archives_named(dir, ours)?;
    let excess = archives.len().saturating_sub(keep.max(1));
    let mut removed = Vec::with_capacity(excess);
    for name in archives.into_iter().take(excess) {
        let path = dir.join(&name);
        fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        removed.push(name);
    }
    Ok(removed)
}

/// What [`STATE_FILE`] holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The schedule in effect, as given (`daily`, `30 2 * * *`).
    pub schedule: String,
    /// The next run, RFC 3339 UTC; `None` when there is none.
    pub next_run: Option<String>,
    /// The last run, if there was one.
    pub last_run: Option<LastRun>,
    /// When the last run that succeeded started.
    #[serde(default)]
    pub last_success: Option<String>,
}

/// One scheduled run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRun {
    /// When it started, RFC 3339 UTC.
    pub started: String,
    /// Whether a new archive was written and verified.
    pub ok: bool,
    /// `ok`, or the error in one line (a failed prune after a good archive is said here).
    pub result: String,
    /// The archive written.
    pub file: Option<PathBuf>,
    /// Its size in bytes.
    pub size: Option<u64>,
    /// How long the run took, in milliseconds.
    pub duration_ms: u64,
    /// The archives pruned after it.
    #[serde(default)]
    pub pruned: Vec<String>,
}

/// RFC 3339 UTC to the second.
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let t = t.replace_nanosecond(0).unwrap_or(t);
    t.format(&Rfc3339)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

/// Reads [`STATE_FILE`] in `dir`; `None` when there is none yet.
///
/// # Errors
/// It cannot be read, or is not a state file.
pub fn read_state(dir: &Path) -> Result<Option<State>, Error> {
    let path = dir.join(STATE_FILE);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| Error::State { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Writes `state` to [`STATE_FILE`] in `dir` atomically (a reader sees the old or the new).
///
/// # Errors
/// It cannot be written.
pub fn write_state(dir: &Path, state: &State) -> Result<(), Error> {
    let mut text = serde_json::to_string_pretty(state).map_err(|source| Error::State {
        path: dir.join(STATE_FILE),
        source,
    })?;
    text.push('\n');
    hermes_home::atomic::write_atomic(&dir.join(STATE_FILE), text.as_bytes(), 0o600)?;
    Ok(())
}

/// Creates `dir` (mode 0700) when it is missing.
///
/// # Errors
/// It cannot be created.
pub fn ensure_dir(dir: &Path) -> Result<(), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io("create", dir, e))
}

/// Removes the partial archives killed scheduled runs left in `dir`
/// (`.hermes-backup-<time>.zip.<pid>.partial` of a process that is gone).
/// Every database of the volume passes `quick_check` (recorded as every check is); else the
/// damaged ones, in words.
fn databases_sound(root: &Path, settings: &BackupSettings) -> Result<(), String> {
    let mode = crate::check::Mode::Keep(
        "found before a scheduled backup, which did not run; `hermes backup check --repair` \
         restores it from the newest sound archive"
            .into(),
    );
    let found = crate::check::check_volume(
        root,
        std::slice::from_ref(&settings.dir),
        &mode,
        &mut |_| {},
    )
    .map_err(|e| hermes_errors::one_line(&e))?;
    let damaged: Vec<String> = found
        .still_damaged()
        .map(|c| format!("profile `{}`: `{}`", c.profile, c.file))
        .collect();
    match damaged.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "not backed up: {} failed its check (`hermes backup check` says more); the archives \
             kept are the sound ones",
            damaged.join(", ")
        )),
    }
}

fn remove_stale_partials(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".partial"))
        else {
            continue;
        };
        let Some((archive, pid)) = rest.rsplit_once('.') else {
            continue;
        };
        let Ok(pid) = pid.parse::<i32>() else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if is_archive_name(archive) && pid > 0 && gone {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// One scheduled backup of the whole volume at `root` into `settings.dir`, started at
/// `started`: check every database first ([`crate::check`]: a damaged one fails the run,
/// naming it, before an archive of it could push a sound one out), write the archive
/// ([`crate::create_file`]), verify it ([`verify::verify`]; one that fails is removed, it
/// would not restore), then prune beyond `settings.keep`. Never fails: what went wrong is the
/// run's result.
pub fn run_once(
    root: &Path,
    settings: &BackupSettings,
    identity: &Identity,
    started: OffsetDateTime,
) -> LastRun {
    let clock = Instant::now();
    let path = settings.dir.join(archive_name(started));
    let mut run = LastRun {
        started: rfc3339(started),
        ok: false,
        result: String::new(),
        file: None,
        size: None,
        duration_ms: 0,
        pruned: Vec::new(),
    };
    let outcome = ensure_dir(&settings.dir)
        .map_err(|e| hermes_errors::one_line(&e))
        .and_then(|()| databases_sound(root, settings))
        .and_then(|()| {
            remove_stale_partials(&settings.dir);
            let scope = Scope::default();
            crate::create_file(
                root,
                &scope,
                identity,
                settings.compression,
                &path,
                &mut |_| {},
            )
            .map_err(|e| hermes_errors::one_line(&e))
        })
        .and_then(|summary| {
            match verify::verify(&path, &mut |_, _, _| {}).and_then(verify::Verified::ok) {
                Ok(_) => Ok(summary),
                Err(e) => {
                    let _ = fs::remove_file(&path);
                    Err(format!(
                        "the new archive failed verification and was removed: {}",
                        hermes_errors::one_line(&e)
                    ))
                }
            }
        });
    match outcome {
        Ok(summary) => {
            run.ok = true;
            run.file = Some(path);
            run.size = Some(summary.archive_bytes);
            run.result = match prune(&settings.dir, settings.keep) {
                Ok(pruned) => {
                    run.pruned = pruned;
                    "ok".to_owned()
                }
                Err(e) => format!("ok, but could not prune: {}", hermes_errors::one_line(&e)),
            };
        }
        Err(line) => run.result = line,
    }
    run.duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
    run
}

#[cfg(test)]
mod tests;
