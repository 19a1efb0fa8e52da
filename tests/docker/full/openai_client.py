"""Asks a gateway through the official `openai` SDK, plain and streamed.

Usage: openai_client.py BASE_URL API_KEY TEXT

Prints `plain: <answer>` and `stream: <answer joined from the deltas>` (one line each); any
error of the SDK is raised, so the exit code tells. The full-* scenarios run it inside the
container with the agent venv's interpreter, which ships the SDK (openai is one of the agent's
own dependencies), against the agent's API server on loopback.
"""

import sys

from openai import OpenAI

if __name__ == "__main__":
    base_url, key, text = sys.argv[1:4]
    client = OpenAI(base_url=base_url, api_key=key, timeout=120, max_retries=0)
    messages = [{"role": "user", "content": text}]
    plain = client.chat.completions.create(model="hermes-agent", messages=messages)
    print("plain:", plain.choices[0].message.content, flush=True)
    parts = []
    for chunk in client.chat.completions.create(model="hermes-agent", messages=messages, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    print("stream:", "".join(parts), flush=True)
