//! The dashboard's Logs page in a real browser (see `ui`): under `hermes up`, a declared
//! service prints the lines the test writes to its input; the page shows its log, a new line
//! appears live, the filter hides what does not match, the view pauses (counting new lines)
//! while the reader is scrolled up, and the download is the log file.

use std::io::Write;
use std::path::Path;

use crate::ui::{Ui, WAIT};
use crate::util::TestContext;
use hermes_test_support::poll;

/// The texts of the log lines shown (not hidden by the filter), read in one script.
fn shown(ui: &Ui) -> Vec<String> {
    let v = ui.browser.execute(
        "return Array.prototype.filter.call(document.querySelectorAll('#log .log-line'), \
         function (l) { return !l.hidden; }).map(function (l) { return l.textContent; });",
    );
    serde_json::from_value(v).unwrap_or_default()
}

fn shown_containing(ui: &Ui, text: &str) -> usize {
    shown(ui).iter().filter(|l| l.contains(text)).count()
}

/// Makes the service print `lines` (it copies its input to its output).
fn say(input: &Path, lines: &str) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(input)
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
}

fn script_value(ui: &Ui, script: &str) -> serde_json::Value {
    ui.browser.execute(script)
}

#[test]
fn follow_a_service_log_live_filter_it_pause_and_download() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);
    let input = t.dir.path().join("echo-input");
    std::fs::write(&input, "").unwrap();
    std::fs::write(
        t.root().join("config.yaml"),
        format!(
            "services:\n  echoer:\n    command: [tail, '-n', '+1', '-F', '{}']\n",
            input.display()
        ),
    )
    .unwrap();
    let _up = t.start_up();
    let log = t.root().join("logs/echoer/current");
    say(&input, "first line from echoer\n");
    poll::until_true("the service's first line in its log", WAIT, || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("first line from echoer"))
    });

    poll::until_true("the service up", WAIT, || {
        t.service("echoer")["state"] == "up"
    });
    let Some(ui) = Ui::open(&t, &[]) else { return };
    ui.goto("logs?service=echoer");
    ui.browser.wait_until("the log's last lines", WAIT, |_| {
        shown_containing(&ui, "first line from echoer") == 1
    });
    assert_eq!(ui.browser.title(), "Hermes — Logs");
    // The page's `<base href>` is in force (the CSP allows it), not the page's own address.
    assert_eq!(
        ui.browser.execute("return document.baseURI;").as_str(),
        Some(format!("http://127.0.0.1:{}/", ui.port).as_str())
    );
    assert_eq!(ui.browser.find("#log-service").value(), "echoer");
    // The picker has the supervisor's state beside the name.
    let label = ui.browser.find("#log-service option[value=echoer]").text();
    assert_eq!(label, "echoer (up)");
    ui.browser.wait_until("the stream live", WAIT, |b| {
        b.find("#log-state").text() == "live"
    });

    // A line written now appears without a reload, with the supervisor's timestamp.
    say(&input, "live line 42: GET /v1/models 200\n");
    ui.browser.wait_until("the new line, live", WAIT, |_| {
        shown_containing(&ui, "live line 42") == 1
    });
    let line = shown(&ui)
        .into_iter()
        .find(|l| l.contains("live line 42"))
        .unwrap();
    assert!(line.starts_with("20"), "timestamped: {line}");
    ui.screenshot("logs");

    // The filter keeps the lines containing the text, in any case.
    let filter = ui.browser.find("#log-filter");
    filter.send_keys("LIVE LINE");
    ui.browser.wait_until("the filter applied", WAIT, |_| {
        let lines = shown(&ui);
        lines.len() == 1 && lines[0].contains("live line 42")
    });
    // A line arriving while filtered is filtered too.
    say(&input, "not matching\nlive line 43\n");
    ui.browser
        .wait_until("the matching new line only", WAIT, |_| {
            shown_containing(&ui, "live line 43") == 1
        });
    assert_eq!(shown_containing(&ui, "not matching"), 0);
    filter.clear();
    ui.browser.execute(
        "document.getElementById('log-filter').dispatchEvent(new Event('input')); return null;",
    );
    ui.browser.wait_until("every line again", WAIT, |_| {
        shown_containing(&ui, "not matching") == 1
    });

    // Enough lines to scroll: the view follows the end.
    let many: String = (0..150).map(|i| format!("filler {i}\n")).collect();
    say(&input, &many);
    ui.browser.wait_until("the view at the end", WAIT, |_| {
        shown_containing(&ui, "filler 149") == 1
            && script_value(
                &ui,
                "var v = document.getElementById('log'); \
                 return v.scrollHeight > v.clientHeight && v.scrollTop + v.clientHeight >= v.scrollHeight - 4;",
            ) == true
    });
    // Scrolled up, it stays put and counts what arrives.
    ui.browser
        .execute("document.getElementById('log').scrollTop = 0; return null;");
    ui.browser.wait_until("the scroll seen", WAIT, |_| {
        script_value(&ui, "return document.getElementById('log').scrollTop;") == 0
    });
    say(&input, "after pause 1\nafter pause 2\nafter pause 3\n");
    let paused = ui.browser.wait_for("#log-paused:not([hidden])", WAIT);
    ui.browser.wait_until("three new lines counted", WAIT, |_| {
        ui.browser
            .find("#log-paused")
            .text()
            .contains("3 new lines")
    });
    assert_eq!(
        script_value(&ui, "return document.getElementById('log').scrollTop;"),
        0,
        "the view did not jump while paused"
    );
    paused.click();
    ui.browser.wait_until("back at the end", WAIT, |_| {
        script_value(
            &ui,
            "var v = document.getElementById('log'); \
             return document.getElementById('log-paused').hidden && v.scrollTop + v.clientHeight >= v.scrollHeight - 4;",
        ) == true
    });

    // The download link serves the log file itself.
    let href = ui.browser.find("#log-download").attribute("href").unwrap();
    assert_eq!(href, "api/logs/echoer/download");
    let downloaded = ui.browser.execute(
        "return fetch(document.getElementById('log-download').href).then(function (r) { return r.text(); });",
    );
    let on_disk = std::fs::read_to_string(&log).unwrap();
    let downloaded = downloaded.as_str().unwrap();
    assert!(
        on_disk.starts_with(downloaded) && downloaded.contains("after pause 3"),
        "the download is the log file"
    );
}
