"""Third-party clients against a running Hermes gateway; prints one JSON document.

Usage: drive_clients.py (openai | agent-client) BASE_URL API_SERVER_KEY

BASE_URL is the gateway's root (`http://127.0.0.1:<port>`), without `/v1`. The script
only drives the clients and reports what they returned; every assertion is made by the
Rust test (`gateway_clients.rs`), which also reads what the fake upstream received.

`openai` (the official SDK, `openai` on PyPI):
  * `models.list()`                           -> GET  /v1/models
  * `chat.completions.create()`               -> POST /v1/chat/completions (not streamed)
  * `chat.completions.create(stream=True)`    -> the same, SSE, assembled from deltas (and the
                                                 chunks carrying `usage`: none, unasked)
  * `stream_options={"include_usage": True}`  -> a stream whose `usage` the SDK parses
  * `with_raw_response` + `extra_headers`     -> X-Hermes-Session-Id sent and echoed, two turns
  * a wrong key                               -> `openai.AuthenticationError` (401)

`agent-client` (`hermes-agent-api-client` on PyPI, needs Python >= 3.13). That package
offers exactly two operations; what each maps to here:
  * `probe_capabilities()`  -> GET /v1/capabilities: the capability set (its model);
  * `stream_chat_events(request, session_id=...)` -> streamed POST /v1/chat/completions
    with X-Hermes-Session-Id: covered fully (deltas, terminal outcome, session history,
    and a wrong key -> `HermesAuthenticationError`), and a request with
    `stream_options.include_usage` -> a `UsageEvent` before the terminal.
"""

import asyncio
import json
import sys


def run_openai(base_url, key):
    import openai
    from openai import OpenAI

    # No SDK retries: a failure must show at once, and the gateway retries upstream itself.
    client = OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=120)
    out = {"sdk_version": openai.__version__}

    out["models"] = [m.id for m in client.models.list()]

    answer = client.chat.completions.create(
        model="any-name-the-gateway-replaces",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "ping plain"},
        ],
    )
    out["plain"] = {
        "text": answer.choices[0].message.content,
        "role": answer.choices[0].message.role,
        "finish_reason": answer.choices[0].finish_reason,
        "model": answer.model,
        "usage": answer.usage.model_dump(exclude_none=True) if answer.usage else None,
    }

    def stream(text, **extra):
        chunks = client.chat.completions.create(
            model="hermes",
            messages=[{"role": "user", "content": text}],
            stream=True,
            **extra,
        )
        deltas, finish, usages = [], None, []
        for chunk in chunks:
            if chunk.usage is not None:
                usages.append(chunk.usage.model_dump(exclude_none=True))
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            if choice.delta.content:
                deltas.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
        return {
            "deltas": deltas,
            "text": "".join(deltas),
            "finish_reason": finish,
            "usages": usages,
        }

    out["stream"] = stream("ping streamed words")
    out["stream_usage"] = stream(
        "ping usage words", stream_options={"include_usage": True}
    )

    # Two turns in one session; the second sends only its new message, so the gateway must
    # supply the first turn from its store.
    session = "openai-sdk.e2e"
    turns = []
    for text in ("remember apples", "what did I ask"):
        raw = client.chat.completions.with_raw_response.create(
            model="hermes",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Hermes-Session-Id": session},
        )
        parsed = raw.parse()
        turns.append(
            {
                "text": parsed.choices[0].message.content,
                "session_header": raw.headers.get("x-hermes-session-id"),
            }
        )
    out["session"] = {"id": session, "turns": turns}

    wrong = OpenAI(base_url=base_url + "/v1", api_key="not-the-key", max_retries=0, timeout=60)
    try:
        wrong.chat.completions.create(
            model="hermes", messages=[{"role": "user", "content": "must not pass"}]
        )
        out["wrong_key"] = {"error": None}
    except openai.AuthenticationError as e:
        body = e.body if isinstance(e.body, dict) else {}
        out["wrong_key"] = {
            "error": type(e).__name__,
            "status": e.status_code,
            "code": body.get("code") or getattr(e, "code", None),
        }
    return out


async def run_agent_client(base_url, key):
    import hermes_agent_api_client as hc

    out = {"client_version": hc.__version__}

    async def stream(client, text, session_id, **extra):
        request = {
            "model": "hermes",
            "stream": True,
            "messages": [{"role": "user", "content": text}],
            **extra,
        }
        events = []
        async for event in client.stream_chat_events(request, session_id=session_id):
            if isinstance(event, hc.AssistantDeltaEvent):
                events.append({"type": "delta", "text": event.text})
            elif isinstance(event, hc.UsageEvent):
                events.append(
                    {
                        "type": "usage",
                        "input_tokens": event.input_tokens,
                        "output_tokens": event.output_tokens,
                        "total_tokens": event.total_tokens,
                    }
                )
            elif isinstance(event, hc.TerminalEvent):
                events.append(
                    {
                        "type": "terminal",
                        "outcome": str(event.outcome),
                        "partial": event.partial,
                    }
                )
            else:
                events.append({"type": type(event).__name__})
        text = "".join(e["text"] for e in events if e["type"] == "delta")
        return {"events": events, "text": text}

    async with hc.HermesAgentApiClient(base_url, key) as client:
        try:
            caps = await client.probe_capabilities()
            out["capabilities"] = {"model": caps.model, "error": None}
        except hc.HermesContractError as e:
            out["capabilities"] = {
                "error": type(e).__name__,
                "status_code": e.status_code,
            }

        session = "agent-client.e2e"
        out["turns"] = [
            await stream(client, "ping agent stream", session),
            await stream(client, "and again", session),
        ]
        out["session"] = session
        out["usage_turn"] = await stream(
            client,
            "ping agent usage",
            None,
            stream_options={"include_usage": True},
        )

    async with hc.HermesAgentApiClient(base_url, "not-the-key") as wrong:
        try:
            await stream(wrong, "must not pass", None)
            out["wrong_key"] = {"error": None}
        except hc.HermesContractError as e:
            out["wrong_key"] = {"error": type(e).__name__, "status_code": e.status_code}
    return out


def main():
    mode, base_url, key = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
    if mode == "openai":
        out = run_openai(base_url, key)
    elif mode == "agent-client":
        out = asyncio.run(run_agent_client(base_url, key))
    else:
        sys.exit(f"unknown mode {mode!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
