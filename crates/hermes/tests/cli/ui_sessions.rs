//! The dashboard's sessions page in a real browser (see `ui`): conversations written by the
//! gateway's own store are listed, one opens with its messages shown as text (markup in a
//! message is not interpreted), and a search finds a word and opens its session.

use hermes_sessions::SessionStore;
use serde_json::json;

use crate::ui::{Ui, WAIT};
use crate::util::TestContext;

/// The text of every element matching `css`, read in one script.
fn texts(ui: &Ui, css: &str) -> Vec<String> {
    let script = format!(
        "return Array.from(document.querySelectorAll({css:?})).map(function (e) {{ return e.textContent; }});"
    );
    ui.browser
        .execute(&script)
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn open_a_session_and_search_its_messages() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    let store = SessionStore::open(&t.root().join("state.db")).unwrap();
    let turn = |id: &str, user: &str, answer: &str| {
        store
            .append(
                id,
                "default",
                &[
                    json!({ "role": "user", "content": user }),
                    json!({ "role": "assistant", "content": answer }),
                ],
            )
            .unwrap();
    };
    turn(
        "trip-planning",
        "Which ferry goes to the lighthouse island?",
        "The morning ferry leaves at 8:15.",
    );
    turn(
        "markup",
        "Render <b>bold</b> and <img src=x onerror=alert(1)>",
        "Shown as text.",
    );
    drop(store);
    let Some(ui) = Ui::open(&t, &[]) else { return };

    ui.goto("sessions");
    ui.browser
        .wait_for("#sessions tr[data-id='trip-planning']", WAIT);
    // Newest first.
    assert_eq!(
        ui.browser.execute(
            "return Array.from(document.querySelectorAll('#sessions tr')).map(function (r) { return r.dataset.id; });"
        ),
        json!(["markup", "trip-planning"])
    );
    // Without a title, a row shows its first message, as the original's list does.
    assert_eq!(
        ui.browser.execute(
            "return document.querySelector(\"#sessions tr[data-id='trip-planning'] td.title\").textContent;"
        ),
        json!("Which ferry goes to the lighthouse island?")
    );

    // Open the one with markup: it is text, not elements.
    ui.browser.find("#sessions tr[data-id='markup']").click();
    ui.browser
        .wait_until("the messages of `markup`", WAIT, |_| {
            texts(&ui, "#messages .content").len() == 2
        });
    assert_eq!(
        texts(&ui, "#messages .content")[0],
        "Render <b>bold</b> and <img src=x onerror=alert(1)>"
    );
    assert_eq!(
        ui.browser
            .execute("return document.querySelectorAll('#messages img, #messages b').length;"),
        json!(0)
    );

    // Search a word: one hit, the word marked, and opening it shows its session.
    ui.browser.find("#q").send_keys("lighthouse");
    ui.browser.find("#search button[type=submit]").click();
    ui.browser.wait_for("#results li.result", WAIT);
    assert_eq!(texts(&ui, "#results li.result mark"), ["lighthouse"]);
    ui.browser.find("#results li.result").click();
    ui.browser.wait_until("the session of the hit", WAIT, |_| {
        texts(&ui, "#session-title") == ["Which ferry goes to the lighthouse island?"]
    });
    assert_eq!(
        texts(&ui, "#messages .content"),
        [
            "Which ferry goes to the lighthouse island?",
            "The morning ferry leaves at 8:15."
        ]
    );
    assert_eq!(texts(&ui, "#messages li.hit .role"), ["user"]);
    ui.screenshot("sessions");

    // Back to the list.
    ui.browser.find("#clear").click();
    ui.browser.wait_until("the list again", WAIT, |_| {
        ui.browser
            .execute("return document.querySelector('#sessions').closest('table').hidden;")
            == json!(false)
    });
}
