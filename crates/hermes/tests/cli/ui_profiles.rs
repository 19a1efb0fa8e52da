//! The dashboard's profiles page in a real browser (see `ui`): create a profile cloned from
//! the default one and see it listed, edit its `SOUL.md` and save it (the file changes), then
//! delete it with the typed confirmation and see it gone from the list and in the trash.

use std::fs;

use crate::ui::{Ui, WAIT};
use crate::util::TestContext;

/// A script's string result (an element re-rendered since it was found is looked up again).
fn script_text(ui: &Ui, script: &str) -> String {
    ui.browser
        .execute(script)
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn create_with_clone_edit_soul_and_delete_with_confirmation() {
    let t = TestContext::new();
    let root = t.root();
    fs::create_dir_all(&root).unwrap();
    hermes_home::layout::ensure_skeleton(&root, true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    fs::write(root.join("SOUL.md"), "You are the default persona.").unwrap();
    t.free_ports(&[]);
    let env = fs::read_to_string(root.join(".env")).unwrap();
    fs::write(
        root.join(".env"),
        format!("{env}# provider keys\nOPENAI_API_KEY=sk-test-0123456789abcdef\n"),
    )
    .unwrap();
    hermes_home::config_file::set_in_file(
        &root.join("config.yaml"),
        &[("model.default", "gpt-4o-mini")],
    )
    .unwrap();
    let _up = t.start_up();
    let Some(ui) = Ui::open(&t, &[]) else { return };

    ui.goto("profiles");
    assert_eq!(ui.browser.title(), "Hermes — Profiles");
    ui.browser
        .wait_for("#profiles tr[data-profile='default']", WAIT);
    ui.browser
        .wait_for("#create-clone option[value='default']", WAIT);

    // Create `work`, cloned from the default profile.
    ui.browser.find("#create-name").send_keys("work");
    ui.browser
        .execute("document.getElementById('create-clone').value = 'default'; return null;");
    ui.browser.find("#create-form button[type=submit]").click();
    ui.browser
        .wait_for("#profiles tr[data-profile='work']", WAIT);
    let dir = root.join("profiles/work");
    assert_eq!(
        fs::read_to_string(dir.join("SOUL.md")).unwrap(),
        "You are the default persona."
    );
    let said = ui.browser.find("#create-result").text();
    assert!(said.contains("Created `work` from `default`"), "{said}");
    // The running supervisor learnt about its gateway at once: registered, down until started.
    assert!(said.contains("Registered `gateway-work`"), "{said}");
    assert_eq!(t.service("gateway-work")["state"], "down");
    ui.browser.wait_until("the work gateway's state in the list", WAIT, |_| {
        script_text(
            &ui,
            "var c = document.querySelector(\"#profiles tr[data-profile='work'] td:nth-child(3)\"); return c ? c.textContent : '';",
        ) == "down"
    });

    // Its panel: the cloned SOUL.md, edited and saved.
    ui.browser
        .find("#profiles tr[data-profile='work'] a")
        .click();
    ui.browser
        .wait_until("the work profile's SOUL.md", WAIT, |b| {
            b.find("#soul-text").value() == "You are the default persona."
        });
    let soul = ui.browser.find("#soul-text");
    soul.clear();
    soul.send_keys("You are the work persona.");
    ui.browser.find("#soul-save").click();
    ui.browser
        .wait_until("the save to be confirmed", WAIT, |_| {
            script_text(
                &ui,
                "return document.getElementById('soul-result').textContent;",
            )
            .starts_with("Saved")
        });
    assert_eq!(
        fs::read_to_string(dir.join("SOUL.md")).unwrap(),
        "You are the work persona."
    );
    // The cloned key is listed masked, never in clear.
    let env_cell = ui
        .browser
        .wait_for("#env tr[data-key='OPENAI_API_KEY'] code", WAIT)
        .text();
    assert_eq!(
        env_cell,
        hermes_home::auth::mask_secret("sk-test-0123456789abcdef")
    );
    ui.browser.execute("window.scrollTo(0, 0); return null;");
    ui.screenshot("profiles");

    // Delete it: the typed name is the confirmation.
    ui.browser.find("#delete-confirm").send_keys("work");
    ui.browser.find("#delete-button").click();
    ui.browser.wait_until("the work row to go", WAIT, |_| {
        script_text(
            &ui,
            "return document.querySelector(\"#profiles tr[data-profile='work']\") ? 'there' : 'gone';",
        ) == "gone"
    });
    assert!(!dir.exists());
    let trashed: Vec<_> = fs::read_dir(root.join("profiles/.trash"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(trashed.len(), 1, "{trashed:?}");
    assert!(
        trashed[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("work-")
    );
    assert_eq!(
        fs::read_to_string(trashed[0].join("SOUL.md")).unwrap(),
        "You are the work persona."
    );
    assert!(
        script_text(
            &ui,
            "return document.getElementById('create-result').textContent;"
        )
        .contains("Deleted `work`")
    );
}
