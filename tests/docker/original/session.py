"""Stores one conversation the way the original (hermes-agent 0.19) does, in a profile's
`state.db`, through its own SessionDB (hermes_state.py): the database, its schema and the rows
are the original's. Run with the ORIGINAL package's interpreter:

    <venv>/bin/python session.py PROFILE_HOME SESSION_ID

(A real conversation would need a model; the rows are the ones its CLI writes for one turn.)
"""

import os
import sys
from pathlib import Path

home, session_id = sys.argv[1:3]
os.environ["HERMES_HOME"] = home
from hermes_state import SessionDB  # noqa: E402

db = SessionDB(Path(home) / "state.db")
db.create_session(session_id, "cli", model="gpt-4.1-mini")
db.append_message(session_id, role="user", content="hello from the original")
db.append_message(session_id, role="assistant", content="hello back, from the original", finish_reason="stop")
db.close()
