"""How a run ended, where the transcript says so: a reader's session metadata → (status, detail).

Readers keep what their format records in `SessionInfo.meta` (tau-bench `reward`, SWE-agent and
mini-swe-agent `exit_status` / `submission`, OpenHands `success` / `error`); this module turns it
into one of a few words the ledger stores on the session (`sessions.outcome`, with a short
detail and the run it belongs to: the session's last run, where the transcript ended).

    success     the environment said the work was right (reward > 0, a CTF flag accepted,
                OpenHands success)
    submitted   the agent submitted (a patch, an answer) and nothing graded it here
    failure     reward 0, an exit by cost/context/format limit or error, OpenHands failure/error

Pure: no I/O. A format that records nothing gives None (the pages then show nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SUCCESS, SUBMITTED, FAILURE = "success", "submitted", "failure"
ENDED_WELL = (SUCCESS, SUBMITTED)  # what Compare counts as "a run that later succeeded"
DETAIL_CHARS = 160
_FLAG = re.compile(r"^[A-Za-z0-9_]{2,16}\{[^{}\n]{1,200}\}$")  # flag{…}, HTB{…}, picoCTF{…}


def _clip(text: str, n: int = DETAIL_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def from_meta(meta: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(status, detail) from a reader's session metadata, or None when it records no ending."""
    if not meta:
        return None
    reward = meta.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        return (SUCCESS if reward > 0 else FAILURE), f"reward {reward:g}"
    if isinstance(meta.get("success"), bool):
        detail = "success" if meta["success"] else "not successful"
        if meta.get("error"):
            detail += f"; error: {_clip(meta['error'])}"
        return (SUCCESS if meta["success"] else FAILURE), detail
    status = meta.get("exit_status")
    if isinstance(status, str) and status.strip():
        word = status.strip().lower()
        sub = meta.get("submission")
        sub = sub.strip() if isinstance(sub, str) else ""
        if word.startswith("submitted"):
            if _FLAG.match(sub):  # the CTF environment ends the run on an accepted flag
                return SUCCESS, f"exit status {status}; flag accepted: {_clip(sub, 80)}"
            return SUBMITTED, f"exit status {status}" + (f"; submission: {_clip(sub, 80)}" if sub else "")
        return FAILURE, f"exit status {status}"
    if meta.get("error"):
        return FAILURE, f"error: {_clip(meta['error'])}"
    if meta.get("submitted_patch"):
        return SUBMITTED, "a patch was submitted"
    return None
