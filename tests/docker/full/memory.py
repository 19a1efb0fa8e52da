"""Stores memory the way the original (hermes-agent 0.19) does, through its own MemoryStore
(tools/memory_tool.py): `memories/MEMORY.md` (the agent's notes) and `memories/USER.md` (what
it knows of the user) in a profile's home. Run with the ORIGINAL package's interpreter:

    <venv>/bin/python memory.py PROFILE_HOME NOTE USER_FACT

(The agent's memory tool makes the same calls when the model asks it to remember something.)
"""

import os
import sys

home, note, user_fact = sys.argv[1:4]
os.environ["HERMES_HOME"] = home
from tools.memory_tool import MemoryStore  # noqa: E402

store = MemoryStore()
store.load_from_disk()
for target, content in (("memory", note), ("user", user_fact)):
    result = store.add(target, content)
    if not result.get("success"):
        sys.exit(f"memory.py: {target}: {result}")
