use std::collections::BTreeMap;

use proptest::prelude::*;
use time::macros::datetime;

use super::*;

fn next(expr: &str, after: OffsetDateTime) -> OffsetDateTime {
    Schedule::parse(expr)
        .unwrap()
        .next_after(after)
        .unwrap_or_else(|| panic!("`{expr}` never runs after {after}"))
}

fn problem(expr: &str) -> String {
    Schedule::parse(expr).unwrap_err().problem
}

#[test]
fn hourly_and_daily_are_the_cron_lines_they_stand_for() {
    let hourly = Schedule::parse("hourly").unwrap();
    assert_eq!(hourly.expression(), "0 * * * *");
    assert_eq!(hourly.to_string(), "hourly (0 * * * *)");
    assert_eq!(Schedule::parse("@Daily").unwrap().expression(), "0 0 * * *");
    assert_eq!(
        Schedule::parse("  30  2 * *   * ").unwrap().to_string(),
        "30 2 * * *"
    );
    let at = datetime!(2026-12-02 13:30:22 UTC);
    assert_eq!(next("hourly", at), datetime!(2026-12-02 14:00 UTC));
    assert_eq!(next("daily", at), datetime!(2026-12-03 00:00 UTC));
}

#[test]
fn the_next_run_is_strictly_after_and_on_a_whole_minute() {
    let at = datetime!(2026-12-02 14:00:00 UTC);
    assert_eq!(next("0 * * * *", at), datetime!(2026-12-02 15:00 UTC));
    assert_eq!(next("* * * * *", at), datetime!(2026-12-02 14:01 UTC));
    assert_eq!(
        next("* * * * *", datetime!(2026-12-02 14:00:59.999 UTC)),
        datetime!(2026-12-02 14:01 UTC)
    );
    // Another offset is read as the UTC instant it is; the answer is in UTC.
    let local = datetime!(2026-12-02 15:30 +01:00);
    let n = next("45 14 * * *", local);
    assert_eq!(n, datetime!(2026-12-02 14:45 UTC));
    assert_eq!(n.offset(), UtcOffset::UTC);
}

#[test]
fn lists_ranges_steps_and_names() {
    let at = datetime!(2026-12-02 13:30 UTC); // a Wednesday
    assert_eq!(next("*/15 * * * *", at), datetime!(2026-12-02 13:45 UTC));
    assert_eq!(next("5,35 * * * *", at), datetime!(2026-12-02 13:35 UTC));
    assert_eq!(next("0 9-17/4 * * *", at), datetime!(2026-12-02 17:00 UTC));
    assert_eq!(next("0 0 * * MON-fri", at), datetime!(2026-12-03 00:00 UTC));
    assert_eq!(next("0 0 * * sat,sun", at), datetime!(2026-12-05 00:00 UTC));
    assert_eq!(next("0 0 1 JAN *", at), datetime!(2027-01-01 00:00 UTC));
    assert_eq!(
        next("0 0 1 mar-may/2 *", at),
        datetime!(2027-03-01 00:00 UTC)
    );
    // 0 and 7 are both Sunday, alone or closing a range.
    assert_eq!(next("0 0 * * 7", at), datetime!(2026-12-06 00:00 UTC));
    assert_eq!(next("0 0 * * 0", at), datetime!(2026-12-06 00:00 UTC));
    assert_eq!(next("0 0 * * 6-7", at), datetime!(2026-12-05 00:00 UTC));
}

#[test]
fn both_day_fields_restricted_means_either_matches() {
    let at = datetime!(2026-12-02 13:30 UTC); // Wednesday the 2nd
    // The 15th or a Friday: Friday the 4th comes first.
    assert_eq!(next("0 0 15 * fri", at), datetime!(2026-12-04 00:00 UTC));
    // The 3rd or a Monday: the 3rd comes first.
    assert_eq!(next("0 0 3 * mon", at), datetime!(2026-12-03 00:00 UTC));
    // A `*` weekday leaves the day of the month alone, and a `*/n` one counts as `*`.
    assert_eq!(next("0 0 15 * *", at), datetime!(2026-12-15 00:00 UTC));
    assert_eq!(next("0 0 15 * */1", at), datetime!(2026-12-15 00:00 UTC));
    assert_eq!(next("0 0 * * fri", at), datetime!(2026-12-04 00:00 UTC));
}

#[test]
fn short_months_and_leap_days() {
    let at = datetime!(2026-12-02 13:30 UTC);
    assert_eq!(next("0 0 31 * *", at), datetime!(2026-12-31 00:00 UTC));
    assert_eq!(
        next("0 0 31 * *", datetime!(2026-12-31 00:00 UTC)),
        datetime!(2027-01-31 00:00 UTC)
    );
    assert_eq!(
        next("0 0 31 * *", datetime!(2027-01-31 00:00 UTC)),
        datetime!(2027-03-31 00:00 UTC)
    );
    assert_eq!(next("0 0 29 feb *", at), datetime!(2028-02-29 00:00 UTC));
    // 2100 is not a leap year: the next 29th of February after 2096's is 2104's.
    assert_eq!(
        next("0 0 29 2 *", datetime!(2096-03-01 00:00 UTC)),
        datetime!(2104-02-29 00:00 UTC)
    );
    assert_eq!(next("59 23 31 12 *", at), datetime!(2026-12-31 23:59 UTC));
    assert_eq!(
        next("0 0 1 1 *", datetime!(2026-12-31 23:59 UTC)),
        datetime!(2027-01-01 00:00 UTC)
    );
}

#[test]
fn the_end_of_the_calendar_is_none_not_a_panic() {
    let schedule = Schedule::parse("* * * * *").unwrap();
    let last = datetime!(9999-12-31 23:59 UTC);
    assert_eq!(schedule.next_after(last), None);
    assert_eq!(
        Schedule::parse("0 0 1 1 *")
            .unwrap()
            .next_after(datetime!(9999-06-01 00:00 UTC)),
        None
    );
}

#[test]
fn a_bad_schedule_names_the_field_and_what_it_allows() {
    let allowed_minute = "(allowed: 0-59, `*`, lists `a,b`, ranges `a-b`, steps `*/n` and `a-b/n`)";
    assert_eq!(
        problem("61 * * * *"),
        format!("minute `61` is out of range {allowed_minute}")
    );
    assert_eq!(
        problem("x * * * *"),
        format!("minute `x` is not a number {allowed_minute}")
    );
    assert!(problem("0 24 * * *").starts_with("hour `24` is out of range (allowed: 0-23,"));
    assert!(problem("0 0 0 * *").starts_with("day-of-month `0` is out of range (allowed: 1-31,"));
    assert!(
        problem("0 0 * foo *")
            .starts_with("month `foo` is not a number (allowed: 1-12 or jan..dec,"),
        "{}",
        problem("0 0 * foo *")
    );
    assert!(
        problem("0 0 * * 8").starts_with(
            "day-of-week `8` is out of range (allowed: 0-7 or sun..sat (0 and 7 are Sunday),"
        ),
        "{}",
        problem("0 0 * * 8")
    );
    assert!(problem("0 0 * * 5-1").starts_with("day-of-week range `5-1` runs backwards"));
    assert!(problem("*/0 * * * *").starts_with("minute step `/0` in `*/0` is not 1-59"));
    assert!(problem("5/10 * * * *").starts_with("minute `5/10`: a step needs a range"));
    assert!(problem("1,,2 * * * *").starts_with("minute `1,,2` has an empty list item"));
    assert!(problem("-1 * * * *").starts_with("minute `` is not a number"));
    assert_eq!(
        problem("* * * *"),
        "4 fields; a schedule is `hourly`, `daily`, or 5 fields: minute hour day-of-month month day-of-week"
    );
    assert!(problem("").starts_with("no fields;"));
    assert!(problem("weekly").starts_with("1 field;"));
    assert_eq!(
        problem("0 0 30 feb *"),
        "day-of-month `30` never falls in month `feb`, so it never runs"
    );
    // With a weekday as well, it runs on those weekdays.
    assert!(Schedule::parse("0 0 30 feb mon").is_ok());
    let e = Schedule::parse("61 * * * *").unwrap_err();
    assert!(
        e.to_string().starts_with("`61 * * * *`: minute `61`"),
        "{e}"
    );
}

/// Every field as a set of values, the slow and obvious way, for the property test.
fn brute_force_matches(
    fields: &[Vec<u32>; 5],
    restricted: (bool, bool),
    t: OffsetDateTime,
) -> bool {
    let [minutes, hours, days, months, weekdays] = fields;
    let weekday = t.weekday().number_days_from_sunday() as u32;
    let day = days.contains(&(t.day() as u32));
    let wd = weekdays.contains(&weekday) || (weekday == 0 && weekdays.contains(&7));
    let day_ok = match restricted {
        (true, true) => day || wd,
        (true, false) => day,
        (false, true) => wd,
        (false, false) => true,
    };
    minutes.contains(&(t.minute() as u32))
        && hours.contains(&(t.hour() as u32))
        && months.contains(&(u8::from(t.month()) as u32))
        && day_ok
}

/// A field's text and its values: `*`, a value, a range, a stepped range or a list of those.
fn field(min: u32, max: u32) -> impl Strategy<Value = (String, Vec<u32>)> {
    let item = prop_oneof![
        (min..=max).prop_map(|v| (v.to_string(), vec![v])),
        (min..=max, min..=max).prop_map(|(a, b)| {
            let (a, b) = (a.min(b), a.max(b));
            (format!("{a}-{b}"), (a..=b).collect())
        }),
        (min..=max, min..=max, 1..=max.max(1)).prop_map(|(a, b, n)| {
            let (a, b) = (a.min(b), a.max(b));
            (
                format!("{a}-{b}/{n}"),
                (a..=b).step_by(n as usize).collect(),
            )
        }),
    ];
    prop_oneof![
        Just(("*".to_owned(), (min..=max).collect())),
        (1..=max.max(1))
            .prop_map(move |n| (format!("*/{n}"), (min..=max).step_by(n as usize).collect())),
        proptest::collection::vec(item, 1..4).prop_map(|items| {
            let text = items
                .iter()
                .map(|(t, _)| t.clone())
                .collect::<Vec<_>>()
                .join(",");
            (text, items.into_iter().flat_map(|(_, v)| v).collect())
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// `next_after` is the first minute a minute-by-minute search finds (over 120 days, or
    /// beyond them when the search finds nothing), and it matches.
    #[test]
    fn next_after_is_the_first_matching_minute(
        minute in field(0, 59),
        hour in field(0, 23),
        day in field(1, 31),
        month in field(1, 12),
        weekday in field(0, 7),
        start in 0i64..(40 * 365 * 24 * 60),
    ) {
        let text = format!("{} {} {} {} {}", minute.0, hour.0, day.0, month.0, weekday.0);
        let schedule = match Schedule::parse(&text) {
            Ok(s) => s,
            // Only a day of the month no chosen month has (checked below) is refused.
            Err(e) => {
                prop_assert!(e.problem.contains("never runs"), "{text}: {e}");
                return Ok(());
            }
        };
        let restricted = (!day.0.starts_with('*'), !weekday.0.starts_with('*'));
        let fields = [minute.1, hour.1, day.1, month.1, weekday.1];
        let after = datetime!(2000-01-01 00:00:17 UTC) + time::Duration::minutes(start);
        let found = schedule.next_after(after);
        let mut t = after.replace_second(0).unwrap() + time::Duration::MINUTE;
        let limit = after + time::Duration::days(120);
        let mut expected = None;
        while t < limit {
            if brute_force_matches(&fields, restricted, t) {
                expected = Some(t);
                break;
            }
            t += time::Duration::MINUTE;
        }
        match expected {
            Some(e) => prop_assert_eq!(found, Some(e), "{}", text),
            None => {
                let found = found.unwrap();
                prop_assert!(found >= limit, "{text}: {found}");
                prop_assert!(brute_force_matches(&fields, restricted, found), "{text}: {found}");
            }
        }
        if let Some(found) = found {
            prop_assert!(schedule.matches(found));
            prop_assert_eq!(found.second(), 0);
        }
    }
}

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

fn settings(root: &Path, config: &str, env: &[(&str, &str)]) -> Result<BackupSettings, Error> {
    let config = Config::parse(&root.join("config.yaml"), config).unwrap();
    BackupSettings::from_config(root, &config, &vars(env))
}

#[test]
fn settings_default_to_none_three_and_the_backups_directory() {
    let root = Path::new("/opt/data");
    let s = settings(root, "", &[]).unwrap();
    assert_eq!(
        s,
        BackupSettings {
            schedule: None,
            keep: 3,
            dir: "/opt/data/backups".into(),
            restore_corrupt: true,
            compression: crate::Compression::Fast,
        }
    );
    assert_eq!(
        s.state_path(),
        Path::new("/opt/data/backups/.schedule.json")
    );
    let s = settings(
        root,
        "backup:\n  schedule: '30 2 * * *'\n  keep: 3\n  dir: /srv/snapshots\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.schedule.unwrap().expression(), "30 2 * * *");
    assert_eq!(s.keep, 3);
    assert_eq!(s.dir, Path::new("/srv/snapshots"));
    // A start keeps a damaged database in place when told to; a word that is no switch is an
    // error naming where it came from.
    assert!(
        !settings(root, "backup:\n  restore_corrupt: false\n", &[])
            .unwrap()
            .restore_corrupt
    );
    assert!(
        settings(
            root,
            "backup:\n  restore_corrupt: false\n",
            &[("HERMES_BACKUP_RESTORE_CORRUPT", "yes")]
        )
        .unwrap()
        .restore_corrupt
    );
    let bad = settings(root, "backup:\n  restore_corrupt: maybe\n", &[]).unwrap_err();
    assert!(bad.to_string().contains("restore_corrupt"), "{bad}");
    // A relative directory is the volume's; `${VAR}` is expanded.
    let s = settings(
        root,
        "backup:\n  schedule: ${SCHED}\n  dir: backups/nightly\n",
        &[("SCHED", "daily")],
    )
    .unwrap();
    assert_eq!(s.schedule.unwrap().text(), "daily");
    assert_eq!(s.dir, Path::new("/opt/data/backups/nightly"));
}

#[test]
fn the_environment_overrides_the_config_and_empty_is_unset() {
    let root = Path::new("/opt/data");
    let config = "backup:\n  schedule: daily\n  keep: 3\n";
    let s = settings(
        root,
        config,
        &[
            (SCHEDULE_VAR, "hourly"),
            (KEEP_VAR, " 12 "),
            (DIR_VAR, "/backups"),
        ],
    )
    .unwrap();
    assert_eq!(s.schedule.unwrap().text(), "hourly");
    assert_eq!(s.keep, 12);
    assert_eq!(s.dir, Path::new("/backups"));
    let s = settings(root, config, &[(SCHEDULE_VAR, ""), (KEEP_VAR, " ")]).unwrap();
    assert_eq!(s.schedule.unwrap().text(), "daily");
    assert_eq!(s.keep, 3);
}

#[test]
fn invalid_settings_say_where_they_came_from_with_a_hint() {
    let root = Path::new("/opt/data");
    let e = settings(root, "backup:\n  schedule: '61 * * * *'\n", &[]).unwrap_err();
    assert_eq!(
        hermes_errors::one_line(&e),
        "invalid backup schedule in `backup.schedule` in `/opt/data/config.yaml`: `61 * * * *`: \
         minute `61` is out of range (allowed: 0-59, `*`, lists `a,b`, ranges `a-b`, steps `*/n` \
         and `a-b/n`)"
    );
    assert!(e.hint().unwrap().contains("`hourly`, `daily`"));
    let e = settings(root, "", &[(SCHEDULE_VAR, "sometimes")]).unwrap_err();
    assert!(
        hermes_errors::one_line(&e).starts_with(
            "invalid backup schedule in `HERMES_BACKUP_SCHEDULE`: `sometimes`: 1 field;"
        ),
        "{e}"
    );
    for keep in ["0", "-1", "seven", "2.5"] {
        let e = settings(root, &format!("backup:\n  keep: {keep}\n"), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid backup keep `{keep}` in `backup.keep` in `/opt/data/config.yaml`: it must be a whole number, 1 or more"
            )
        );
        assert!(e.hint().is_some());
    }
    let e = settings(root, "", &[(KEEP_VAR, "0")]).unwrap_err();
    assert!(e.to_string().contains("in `HERMES_BACKUP_KEEP`"), "{e}");
    let e = settings(root, "backup:\n  schedule: [daily]\n", &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "`backup.schedule` in `/opt/data/config.yaml` must be a single value"
    );
    // A directory a backup would hold: every archive would hold the ones before it.
    for dir in ["snapshots", "/opt/data", "profiles/work/x"] {
        let e = settings(root, &format!("backup:\n  dir: {dir}\n"), &[]).unwrap_err();
        assert!(matches!(e, Error::DirBackedUp { .. }), "{dir}: {e}");
        assert!(e.hint().unwrap().contains("`backups`"));
    }
    for dir in [
        "backups",
        "/opt/data/backups/x",
        "/srv",
        "profiles/work/backups",
    ] {
        assert!(
            settings(root, &format!("backup:\n  dir: {dir}\n"), &[]).is_ok(),
            "{dir}"
        );
    }
}

#[test]
fn archive_names_are_the_utc_time_to_the_second() {
    let name = archive_name(datetime!(2026-12-02 10:15:00.75 +01:00));
    assert_eq!(name, "hermes-backup-20261202-091500.zip");
    assert!(is_archive_name(&name));
    for other in [
        "hermes-backup-20261202-09150.zip",
        "hermes-backup-20261202_091500.zip",
        "hermes-backup-20261202-091500.zip.partial",
        ".hermes-backup-20261202-091500.zip",
        "nightly.zip",
        "hermes-backup-2026120a-091500.zip",
    ] {
        assert!(!is_archive_name(other), "{other}");
    }
}

#[test]
fn pruning_removes_the_oldest_scheduled_archives_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ours = [
        "hermes-backup-20261201-000000.zip",
        "hermes-backup-20261202-000000.zip",
        "hermes-backup-20261130-230000.zip",
        "hermes-backup-20261202-010000.zip",
    ];
    for name in ours {
        fs::write(d.join(name), name).unwrap();
    }
    let others = [
        "nightly.zip",
        "hermes-backup-manual.zip",
        ".schedule.json",
        "hermes-backup-20200101-000000.zip.bak",
    ];
    for name in others {
        fs::write(d.join(name), "keep me").unwrap();
    }
    // A directory and a symlink of our name form are not archives.
    fs::create_dir(d.join("hermes-backup-20000101-000000.zip")).unwrap();
    std::os::unix::fs::symlink("nightly.zip", d.join("hermes-backup-20000102-000000.zip")).unwrap();

    assert_eq!(
        scheduled_archives(d).unwrap(),
        [
            "hermes-backup-20261130-230000.zip",
            "hermes-backup-20261201-000000.zip",
            "hermes-backup-20261202-000000.zip",
            "hermes-backup-20261202-010000.zip",
        ]
    );
    assert_eq!(prune(d, 5).unwrap(), Vec::<String>::new());
    assert_eq!(
        prune(d, 2).unwrap(),
        [
            "hermes-backup-20261130-230000.zip",
            "hermes-backup-20261201-000000.zip",
        ]
    );
    assert_eq!(
        scheduled_archives(d).unwrap(),
        [
            "hermes-backup-20261202-000000.zip",
            "hermes-backup-20261202-010000.zip",
        ]
    );
    for name in others {
        assert_eq!(
            fs::read_to_string(d.join(name)).unwrap(),
            "keep me",
            "{name}"
        );
    }
    assert!(d.join("hermes-backup-20000101-000000.zip").is_dir());
    assert!(d.join("hermes-backup-20000102-000000.zip").is_symlink());
    // Keep is at least one; a missing directory has nothing to prune.
    assert_eq!(prune(d, 0).unwrap(), ["hermes-backup-20261202-000000.zip"]);
    assert_eq!(prune(&d.join("missing"), 1).unwrap(), Vec::<String>::new());
}

#[test]
fn the_state_file_round_trips_and_a_foreign_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_state(dir.path()).unwrap(), None);
    let state = State {
        schedule: "daily".into(),
        next_run: Some("2026-12-03T00:00:00Z".into()),
        last_run: Some(LastRun {
            started: "2026-12-02T00:00:00Z".into(),
            ok: true,
            result: "ok".into(),
            file: Some(dir.path().join("hermes-backup-20261202-000000.zip")),
            size: Some(1234),
            duration_ms: 56,
            pruned: vec!["hermes-backup-20261125-000000.zip".into()],
        }),
        last_success: Some("2026-12-02T00:00:00Z".into()),
    };
    write_state(dir.path(), &state).unwrap();
    assert_eq!(read_state(dir.path()).unwrap(), Some(state));
    let path = dir.path().join(STATE_FILE);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    fs::write(&path, "[1]").unwrap();
    let e = read_state(dir.path()).unwrap_err();
    assert!(matches!(e, Error::State { .. }), "{e}");
    assert!(e.hint().unwrap().contains("remove"));
}

#[test]
fn rfc3339_is_utc_to_the_second() {
    assert_eq!(
        rfc3339(datetime!(2026-12-02 10:15:00.75 +01:00)),
        "2026-12-02T09:15:00Z"
    );
}

/// A small volume: the root's config, a database, a profile's file.
fn volume() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    fs::write(r.join("config.yaml"), "model: test\n").unwrap();
    fs::create_dir_all(r.join("profiles/work")).unwrap();
    fs::write(r.join("profiles/work/SOUL.md"), "a soul\n").unwrap();
    let db = rusqlite::Connection::open(r.join("state.db")).unwrap();
    db.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    root
}

#[test]
fn a_run_writes_a_verified_archive_then_prunes_beyond_keep() {
    let root = volume();
    let settings = BackupSettings {
        schedule: Some(Schedule::parse("daily").unwrap()),
        keep: 2,
        dir: root.path().join("backups"),
        restore_corrupt: true,
        compression: crate::Compression::Fast,
    };
    fs::create_dir_all(&settings.dir).unwrap();
    for name in [
        "hermes-backup-20261130-000000.zip",
        "hermes-backup-20261201-000000.zip",
    ] {
        fs::write(settings.dir.join(name), "old").unwrap();
    }
    fs::write(settings.dir.join("mine.zip"), "keep me").unwrap();
    // A partial archive a killed run left (no such process), and one of a live process.
    fs::write(
        settings
            .dir
            .join(".hermes-backup-20261201-120000.zip.2147483646.partial"),
        "",
    )
    .unwrap();
    let live = format!(
        ".hermes-backup-20261201-130000.zip.{}.partial",
        std::process::id()
    );
    fs::write(settings.dir.join(&live), "").unwrap();

    let started = datetime!(2026-12-02 00:00:00 UTC);
    let run = run_once(root.path(), &settings, &Identity::default(), started);
    assert!(run.ok, "{run:?}");
    assert_eq!(run.result, "ok");
    assert_eq!(run.started, "2026-12-02T00:00:00Z");
    let file = settings.dir.join("hermes-backup-20261202-000000.zip");
    assert_eq!(run.file.as_deref(), Some(file.as_path()));
    assert_eq!(run.size, Some(fs::metadata(&file).unwrap().len()));
    assert_eq!(run.pruned, ["hermes-backup-20261130-000000.zip"]);
    let verified = verify::verify(&file, &mut |_, _, _| {})
        .unwrap()
        .ok()
        .unwrap();
    let rels: Vec<&str> = verified.files.iter().map(|f| f.rel.as_str()).collect();
    assert!(rels.contains(&"state.db"), "{rels:?}");
    assert!(rels.contains(&"profiles/work/SOUL.md"), "{rels:?}");
    assert!(
        !rels
            .iter()
            .any(|r| r.starts_with("backups/hermes-backup-2026")),
        "{rels:?}"
    );
    assert_eq!(
        scheduled_archives(&settings.dir).unwrap(),
        [
            "hermes-backup-20261201-000000.zip",
            "hermes-backup-20261202-000000.zip",
        ]
    );
    assert!(settings.dir.join("mine.zip").exists());
    assert!(
        !settings
            .dir
            .join(".hermes-backup-20261201-120000.zip.2147483646.partial")
            .exists()
    );
    assert!(settings.dir.join(&live).exists());
}

#[test]
fn a_damaged_database_fails_the_run_before_any_archive_and_prunes_nothing() {
    let root = volume();
    let settings = BackupSettings {
        schedule: Some(Schedule::parse("daily").unwrap()),
        keep: 1,
        dir: root.path().join("backups"),
        restore_corrupt: true,
        compression: crate::Compression::Fast,
    };
    fs::create_dir_all(&settings.dir).unwrap();
    fs::write(
        settings.dir.join("hermes-backup-20261130-000000.zip"),
        "old",
    )
    .unwrap();
    // The header of the table's page overwritten.
    let db = root.path().join("state.db");
    let mut bytes = fs::read(&db).unwrap();
    bytes[4096..4104].copy_from_slice(&[0xff; 8]);
    fs::write(&db, bytes).unwrap();
    let run = run_once(
        root.path(),
        &settings,
        &Identity::default(),
        datetime!(2026-12-02 00:00:00 UTC),
    );
    assert!(!run.ok);
    assert!(
        run.result
            .contains("not backed up: profile `default`: `state.db` failed its check"),
        "{}",
        run.result
    );
    assert_eq!(run.file, None);
    assert!(run.pruned.is_empty());
    assert_eq!(
        scheduled_archives(&settings.dir).unwrap(),
        ["hermes-backup-20261130-000000.zip"]
    );
    assert!(
        hermes_home::db_check::read(root.path()).is_some(),
        "recorded, for status and doctor"
    );
}

#[test]
fn a_failed_run_is_its_result_and_prunes_nothing() {
    let root = volume();
    let settings = BackupSettings {
        schedule: Some(Schedule::parse("daily").unwrap()),
        keep: 1,
        dir: root.path().join("backups"),
        restore_corrupt: true,
        compression: crate::Compression::Fast,
    };
    fs::create_dir_all(&settings.dir).unwrap();
    for name in [
        "hermes-backup-20261130-000000.zip",
        "hermes-backup-20261201-000000.zip",
    ] {
        fs::write(settings.dir.join(name), "old").unwrap();
    }
    // The archive's name is taken: the run fails, and nothing is pruned.
    let started = datetime!(2026-12-01 00:00:00 UTC);
    let run = run_once(root.path(), &settings, &Identity::default(), started);
    assert!(!run.ok);
    assert!(run.result.ends_with("already exists"), "{}", run.result);
    assert_eq!(run.file, None);
    assert!(run.pruned.is_empty());
    assert_eq!(scheduled_archives(&settings.dir).unwrap().len(), 2);
    // A directory that cannot be made is a result too.
    let blocked = BackupSettings {
        dir: root.path().join("config.yaml/backups"),
        ..settings
    };
    let run = run_once(root.path(), &blocked, &Identity::default(), started);
    assert!(!run.ok);
    assert!(run.result.starts_with("could not create"), "{}", run.result);
}

#[test]
fn every_error_has_a_hint() {
    for (pattern, e) in Error::every_variant() {
        if !matches!(e, Error::Home(_)) {
            assert!(e.hint().is_some(), "{pattern}");
        }
    }
}
