//! The dashboard's Overview in a real browser (see `ui`): sign in with the token link, see the
//! gateway's row, stop and start it with the buttons and see the row change.

use crate::ui::{Ui, WAIT};
use crate::util::TestContext;

/// The State cell of `service`'s row.
fn state_cell(ui: &Ui, service: &str) -> String {
    cell(ui, service, 2)
}

/// Cell `n` (from 1) of `service`'s row, read in one script (rows are re-rendered on every
/// event, so an element found earlier may be gone).
fn cell(ui: &Ui, service: &str, n: usize) -> String {
    let script = format!(
        "var c = document.querySelector(\"tr[data-service='{service}'] td:nth-child({n})\"); return c ? c.textContent : '';"
    );
    ui.browser
        .execute(&script)
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn sign_in_then_stop_and_start_a_gateway_with_the_buttons() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);
    let _up = t.start_up();
    let Some(ui) = Ui::open(&t, &[]) else { return };

    // Signed in by the link: the token left the address bar, the cookie is HttpOnly.
    assert_eq!(
        ui.browser.current_url(),
        format!("http://127.0.0.1:{}/", ui.port)
    );
    let cookie = ui.browser.cookie("hermes_dashboard_session").unwrap();
    assert!(cookie.http_only);
    assert_eq!(ui.browser.title(), "Hermes — Overview");

    let row = "tr[data-service='gateway-default']";
    ui.browser.wait_for(row, WAIT);
    ui.browser.wait_until("the gateway up", WAIT, |_| {
        state_cell(&ui, "gateway-default") == "up"
    });
    ui.screenshot("overview");
    // The buttons follow the state: a running gateway has no Start.
    let disabled = |ui: &Ui, verb: &str| {
        ui.browser.execute(&format!(
            "var b = document.querySelector(\"{row} button[data-action={verb}]\"); return b ? b.disabled : null;"
        ))
    };
    assert_eq!(disabled(&ui, "start"), serde_json::json!(true));
    assert_eq!(disabled(&ui, "stop"), serde_json::json!(false));

    ui.browser
        .find(&format!("{row} button[data-action=stop]"))
        .click();
    ui.browser.wait_until("the row shows down", WAIT, |_| {
        state_cell(&ui, "gateway-default") == "down"
    });
    assert_eq!(t.service("gateway-default")["state"], "down");
    ui.browser
        .wait_until("a stopped gateway has no Stop", WAIT, |_| {
            disabled(&ui, "stop") == serde_json::json!(true)
                && disabled(&ui, "start") == serde_json::json!(false)
        });

    ui.browser
        .find(&format!("{row} button[data-action=start]"))
        .click();
    ui.browser.wait_until("the row shows up again", WAIT, |_| {
        state_cell(&ui, "gateway-default") == "up"
    });
    assert_eq!(t.service("gateway-default")["state"], "up");
    // The stop's exit, in the words the CLI's table uses (never raw JSON): ours, so stopped.
    let last_exit = cell(&ui, "gateway-default", 8);
    assert!(
        last_exit.starts_with("stopped (code ") || last_exit.starts_with("stopped (signal "),
        "Last exit: {last_exit:?}"
    );

    // A reload shows the same truth, asked afresh.
    ui.goto("");
    ui.browser.wait_until("the row after a reload", WAIT, |_| {
        state_cell(&ui, "gateway-default") == "up"
    });
}
