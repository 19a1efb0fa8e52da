//! The browser harness against a small static site served on loopback by the test itself:
//! navigation, clicks that run JavaScript, typing, a form, a link, cookies, a screenshot, and
//! no browser process left behind after drop.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::response::{AppendHeaders, Html};
use axum::routing::get;
use hermes_test_support::browser::{Browser, Cookie, WINDOW_SIZE};

const WAIT: Duration = Duration::from_secs(10);

const HOME: &str = r#"<!doctype html>
<html><head><title>Harness home</title></head>
<body style="background:#fff">
  <h1 id="greeting">Waiting</h1>
  <button id="change" onclick="document.getElementById('greeting').textContent = 'Clicked'">Change</button>
  <button id="later" onclick="setTimeout(() => {
      const p = document.createElement('p'); p.id = 'late'; p.textContent = 'arrived';
      document.body.appendChild(p); }, 300)">Later</button>
  <form action="/echo" method="get">
    <input id="name" name="name" value="">
    <button id="send" type="submit">Send</button>
  </form>
  <a id="next" href="/next">Next page</a>
</body></html>"#;

/// The test's site: a home page that also sets a cookie, a form target echoing its input,
/// and a second page.
fn site() -> Router {
    Router::new()
        .route(
            "/",
            get(|| async {
                (
                    AppendHeaders([("set-cookie", "from_server=hello; Path=/")]),
                    Html(HOME),
                )
            }),
        )
        .route(
            "/echo",
            get(
                |Query(q): Query<std::collections::HashMap<String, String>>| async move {
                    let name = q.get("name").cloned().unwrap_or_default();
                    let name: String = name.chars().filter(|c| c.is_alphanumeric()).collect();
                    Html(format!("<p id=\"echo\">Hello {name}</p>"))
                },
            ),
        )
        .route(
            "/next",
            get(|| async { Html("<title>Second</title><p id=\"where\">second page</p>") }),
        )
}

/// Serves [`site`] on a free loopback port from a thread of its own, for the test's life.
fn serve() -> String {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .unwrap_or_else(|e| panic!("cannot listen on loopback: {e}"));
    let addr: SocketAddr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("the listener has no address: {e}"));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("no runtime for the test's site: {e}"));
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)
                .unwrap_or_else(|e| panic!("cannot serve the test's site: {e}"));
            axum::serve(listener, site())
                .await
                .unwrap_or_else(|e| panic!("the test's site stopped: {e}"));
        });
    });
    format!("http://{addr}")
}

#[test]
fn drives_a_page_through_clicks_typing_links_cookies_and_screenshots() {
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let base = serve();

    browser.goto(&format!("{base}/"));
    assert_eq!(browser.current_url(), format!("{base}/"));
    assert_eq!(browser.title(), "Harness home");
    assert_eq!(browser.find("#greeting").text(), "Waiting");

    // A click runs the page's JavaScript.
    browser.find("#change").click();
    assert_eq!(browser.find("#greeting").text(), "Clicked");

    // Something that appears later is waited for, not guessed.
    assert!(browser.find_all("#late").is_empty());
    browser.find("#later").click();
    assert_eq!(browser.wait_for("#late", WAIT).text(), "arrived");

    // Scripts run in the page and return JSON.
    let heading = browser.execute("return document.querySelector('h1').textContent;");
    assert_eq!(heading, serde_json::json!("Clicked"));
    let buttons = browser.execute("return document.querySelectorAll('button').length;");
    assert_eq!(buttons, serde_json::json!(3));

    // Cookies: the one the server set, and one added through WebDriver that the page can read.
    let from_server = browser.cookie("from_server").expect("the server's cookie");
    assert_eq!(from_server.value, "hello");
    browser.add_cookie(&Cookie::new("added", "by-test"));
    assert_eq!(
        browser.cookie("added").map(|c| c.value),
        Some("by-test".to_owned())
    );
    let seen = browser.execute("return document.cookie;");
    assert!(
        seen.as_str().is_some_and(|c| c.contains("added=by-test")),
        "{seen}"
    );

    // The screenshot is a PNG of the fixed window size.
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("home.png");
    browser.screenshot(&shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() > 1024, "a {}-byte screenshot", png.len());
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), WINDOW_SIZE);

    // Typing, then a form submission that the server echoes.
    let input = browser.find("#name");
    input.send_keys("Ada");
    assert_eq!(input.value(), "Ada");
    input.clear();
    input.send_keys("Grace");
    browser.find("#send").click();
    assert_eq!(browser.wait_for("#echo", WAIT).text(), "Hello Grace");
    assert_eq!(browser.current_url(), format!("{base}/echo?name=Grace"));

    // Following a link.
    browser.goto(&format!("{base}/"));
    let link = browser.find("#next");
    assert_eq!(link.attribute("href").as_deref(), Some("/next"));
    link.click();
    browser.wait_until("the second page", WAIT, |b| {
        b.current_url() == format!("{base}/next")
    });
    assert_eq!(browser.find("#where").text(), "second page");
    assert_eq!(browser.title(), "Second");
}

#[test]
fn a_failed_step_names_the_step_and_the_page() {
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let base = serve();
    browser.goto(&format!("{base}/next"));

    let missing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        browser.find("#nowhere");
    }));
    let message = panic_message(missing.expect_err("finding a missing element must fail"));
    assert!(message.contains("find `#nowhere`"), "{message}");
    assert!(message.contains(&format!("{base}/next")), "{message}");
    assert!(message.contains("no such element"), "{message}");

    let late = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        browser.wait_for("#never", Duration::from_millis(200));
    }));
    let message = panic_message(late.expect_err("waiting for nothing must time out"));
    assert!(message.contains("wait for `#never` to appear"), "{message}");
    assert!(message.contains(&format!("{base}/next")), "{message}");
}

#[test]
fn drop_leaves_no_driver_or_browser_process() {
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let base = serve();
    browser.goto(&format!("{base}/"));
    let group = browser.driver_pid().to_string();
    let profile = browser.profile_dir().display().to_string();

    // While it runs, the driver's group holds the browser too (else the check below is empty
    // for the wrong reason).
    let running = pgrep(&["-f", &profile]);
    assert!(
        !running.is_empty(),
        "no process names the profile {profile}"
    );
    let in_group = pgrep(&["-g", &group]);
    assert!(
        in_group.iter().any(|p| p.contains("chromedriver"))
            && in_group.iter().any(|p| p.contains(&profile)),
        "group {group} lacks the driver or the browser: {in_group:?}"
    );

    drop(browser);
    assert_eq!(
        pgrep(&["-g", &group]),
        Vec::<String>::new(),
        "left in group {group}"
    );
    assert_eq!(
        pgrep(&["-f", &profile]),
        Vec::<String>::new(),
        "left using {profile}"
    );
}

/// The live (non-zombie) processes `pgrep` finds, as `pid command` lines.
fn pgrep(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("pgrep")
        .args(["-a", "-r", "RSDTtWPI"]) // every state but Z: a zombie runs nothing
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run pgrep: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}
