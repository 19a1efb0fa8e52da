//! A full volume: an answer whose turn cannot be stored is never acknowledged as complete. A
//! plain request gets a 500; a streamed one, which is already 200 by then, ends with an error
//! event instead of `[DONE]` alone, so the client knows the session does not hold it. Once
//! there is room again, the session goes on from the last turn that was acknowledged.

use serde_json::{Value, json};

use crate::support::{Upstream, client, echo_of, settings, sse_data, start};
use hermes_test_support::disk::SmallDisk;

const KEY: &str = "Bearer gw-key";

fn turn(content: &str, stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn a_turn_that_cannot_be_stored_is_never_acknowledged() {
    if hermes_test_support::skip_unless_root("mounting a small tmpfs as the volume needs root") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(&base.path().join("volume"), "8m");
    let up = Upstream::start().await;
    let gw = start(settings(disk.path(), "work", Some(&up))).await;
    let c = client();
    let send = |content: &str, stream: bool| {
        c.post(gw.url("/v1/chat/completions"))
            .header("authorization", KEY)
            .header("x-hermes-session-id", "conv-1")
            .json(&turn(content, stream))
            .send()
    };

    let first = send("first", false).await.unwrap();
    assert_eq!(first.status(), 200);

    disk.fill("ballast", 0);
    let streamed = send("second", true).await.unwrap();
    assert_eq!(streamed.status(), 200, "the stream had begun");
    let body = streamed.text().await.unwrap();
    let events = sse_data(&body);
    let error = events
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event, the turn looked stored: {body}"));
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be stored"),
        "{error}"
    );
    let plain = send("third", false).await.unwrap();
    assert_eq!(plain.status(), 500, "{}", plain.text().await.unwrap());

    std::fs::remove_file(disk.path().join("ballast")).unwrap();
    let after = send("fourth", false).await.unwrap();
    assert_eq!(after.status(), 200);
    let history: Vec<String> = up.seen().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        history,
        ["first", &echo_of("first"), "fourth"],
        "only acknowledged turns are in the session"
    );
}
