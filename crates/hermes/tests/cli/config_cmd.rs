//! `config.yaml` writes keep every byte they do not change (`memory setup`), and `hermes
//! config` (path, env-path, get, set, unset, edit) as the original's users use it.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::{TestContext, render};

/// Comments, quoting, a flow and a block list, odd indentation, CRLF line endings.
const HAND_WRITTEN: &str = "# my settings\r\n_config_version: 33\r\nmodel:\r\n   default: 'gpt-4o'   # pinned\r\n   provider: \"openrouter\"\r\ntoolsets: [web, terminal]\r\nallow:\r\n-   a\r\n-   'b'\r\nmemory:\r\n   provider: ''  # built-in for now\r\n\r\n# end\r\n";

fn tinymem(t: &TestContext) {
    let plugin = t.root().join("plugins/tinymem");
    fs::create_dir_all(&plugin).unwrap();
    fs::write(plugin.join("plugin.yaml"), "name: tinymem\nkind: memory\n").unwrap();
}

#[test]
fn memory_setup_changes_only_memory_provider() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    fs::write(&path, HAND_WRITTEN).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    tinymem(&t);
    let out = t.run(&["memory", "setup", "tinymem", "--non-interactive"]);
    assert!(out.status.success(), "{}", render(&out));
    let after = fs::read(&path).unwrap();
    assert_eq!(
        String::from_utf8(after).unwrap(),
        HAND_WRITTEN.replace("provider: ''  #", "provider: 'tinymem'  #")
    );
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}
