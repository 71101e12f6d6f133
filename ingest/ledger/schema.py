"""The ledger's tables, in SQLAlchemy Core. Changed only through a migration (ingest/ledger/migrations).

Conventions: a session's events are numbered by `seq` (0-based, every kind); `calls` and `checks`
point at the batch event by `seq` and at the call inside it by `idx` (checks of batch-level
detectors use idx = -1). Text columns holding transcript text are capped at ingest; the full
text's digest is kept beside them so equality stays exact.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

# File sizes and offsets: 64-bit on PostgreSQL (transcripts can pass 2 GiB); SQLite's INTEGER is
# already 64-bit, and keeping it INTEGER there avoids rebuilding a table that others cascade from.
ByteCount = BigInteger().with_variant(Integer(), "sqlite")

# Transcript times: TEXT on PostgreSQL (migration 0003: VARCHAR(40) refused longer values there).
# SQLite never enforces a declared length, and rebuilding its tables to change the declaration
# would copy every event, so its columns keep the VARCHAR(40) they were created with.
TIME_TEXT = String(40).with_variant(Text(), "postgresql")
BATCH_LEVEL = -1  # checks.idx / results.idx of a check on a whole batch (run-length)

sources = Table(
    "sources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("path", Text, nullable=False, unique=True),
    Column("format", String(40)),
    Column("size", ByteCount, nullable=False, default=0),
    Column("mtime", Float),
    Column("content_hash", String(64)),  # digest of the bytes up to byte_offset
    Column("byte_offset", ByteCount, nullable=False, default=0),  # bytes read and stored
    Column("status", String(20), nullable=False, default="new"),  # new|ok|quarantined|error|missing|truncated
    Column("error", Text),
    Column("claimed_by", String(80)),  # worker id holding it (several workers on PostgreSQL)
    Column("claimed_at", Float),
    Column("ingested_at", Float),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("source_id", Integer, ForeignKey("sources.id", ondelete="CASCADE"), nullable=False),
    Column("key", Text, nullable=False),
    Column("format", String(40), nullable=False),
    Column("title", Text, nullable=False, default=""),
    Column("agent", Text),
    Column("model", Text),
    Column("started_at", TIME_TEXT),  # ISO 8601 UTC as the readers normalize it
    Column("ended_at", TIME_TEXT),
    Column("started_at_original", Text),  # as the transcript wrote it, where that said more
    Column("parent_id", Integer, ForeignKey("sessions.id", ondelete="SET NULL")),
    Column("parent_key", Text),
    Column("n_events", Integer, nullable=False, default=0),
    Column("n_runs", Integer, nullable=False, default=0),
    Column("n_calls", Integer, nullable=False, default=0),
    Column("updated_at", Float),
    # How the transcript says it ended (loopledger.analysis.outcome): success | submitted | failure, or NULL.
    Column("outcome", String(12)),
    Column("outcome_detail", Text),
    Column("outcome_run", Integer),  # the run it belongs to (the session's last run)
    # The email of the team member whose guard forwarded it (migration 0012_team); NULL otherwise.
    Column("member", Text),
    UniqueConstraint("source_id", "key", name="uq_sessions_source_key"),
)
Index("ix_sessions_member", sessions.c.member)

runs = Table(
    "runs",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("idx", Integer, primary_key=True),  # 0-based run number within the session
    Column("first_seq", Integer, nullable=False),
    Column("last_seq", Integer, nullable=False),
    Column("n_calls", Integer, nullable=False, default=0),
    Column("started_at", TIME_TEXT),
    Column("user_text", Text),  # capped
)

events = Table(
    "events",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("run_idx", Integer, nullable=False),
    Column("kind", String(10), nullable=False),  # user|prose|batch|answers (loopledger.vocab)
    Column("text", Text),  # capped; for answers events NULL (answers live on calls)
    Column("text_hash", String(32)),  # digest of the full text (stagnation compares it)
    Column("ts", TIME_TEXT),
    Column("line", Integer),
)

calls = Table(
    "calls",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the batch event
    Column("idx", Integer, primary_key=True),  # position in the batch
    Column("run_idx", Integer, nullable=False),
    Column("call_id", Text),
    Column("tool", Text, nullable=False),
    Column("args", Text, nullable=False),  # canonical JSON (capped) or the raw malformed string
    Column("args_hash", String(32), nullable=False),
    Column("args_malformed", Boolean, nullable=False, default=False),
    Column("answer", Text),  # capped; NULL while unanswered
    Column("answer_hash", String(32)),  # digest of the full answer text
    Column("answer_len", Integer),
    Column("is_error", Boolean),
    Column("answer_seq", Integer),  # the answers event that carried it
    Column("answer_ts", TIME_TEXT),
)
Index("ix_calls_tool", calls.c.tool)

policies = Table(
    "policies",
    metadata,
    Column("id", String(32), primary_key=True),  # hash of the canonical spec
    # Up to 200: a plugin named by import path (mypkg.guards:make_guard); migration 0003. SQLite
    # ignores VARCHAR lengths, so its ledgers keep the declared 20 (no table rebuild).
    Column("detector", String(200).with_variant(String(20), "sqlite"), nullable=False),
    Column("params", Text, nullable=False),  # canonical JSON
    Column("label", Text, nullable=False),
    Column("is_default", Boolean, nullable=False, default=False),
    Column("created_at", Float),
)

checks = Table(
    "checks",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("idx", Integer, primary_key=True),  # call index, or BATCH_LEVEL
    Column("run_idx", Integer, nullable=False),
    Column("verdict", String(12), nullable=False),  # allow|warn|block|halt|after_halt
    Column("count", Integer),
    Column("total", Integer),
    Column("threshold", Integer),
    Column("reason", Text),
)

results = Table(
    "results",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the batch event the answers belong to
    Column("idx", Integer, primary_key=True),
    Column("outcome", String(16), nullable=False),  # repeated|changed|not_comparable|not_current
)

# Kept current at ingest so the Sessions page never scans `checks`.
session_stats = Table(
    "session_stats",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE"), primary_key=True),
    Column("runs", Integer, nullable=False, default=0),
    Column("calls", Integer, nullable=False, default=0),
    Column("strikes", Integer, nullable=False, default=0),
    Column("warnings", Integer, nullable=False, default=0),
    Column("blocks", Integer, nullable=False, default=0),
    Column("halts", Integer, nullable=False, default=0),
    Column("saved", Integer, nullable=False, default=0),  # calls a halt would have saved
    Column("halted_runs", Integer, nullable=False, default=0),
    Column("first_halt_seq", Integer),
)
Index("ix_session_stats_policy", session_stats.c.policy_id, session_stats.c.halts)

run_outcomes = Table(
    "run_outcomes",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("run_idx", Integer, primary_key=True),
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE"), primary_key=True),
    Column("outcome", String(10), nullable=False),  # clean|warned|blocked|halted
    Column("halt_seq", Integer),
    Column("halt_idx", Integer),
    Column("strikes", Integer, nullable=False, default=0),
    Column("warnings", Integer, nullable=False, default=0),
    Column("blocks", Integer, nullable=False, default=0),
    Column("saved", Integer, nullable=False, default=0),
)

# What each model turn used and cost (migration 0011_cost): one row per Prose/Batch event whose
# transcript reports usage, at that event's seq, so spend after a halt is a range over seq.
# input_tokens counts all input, cache reads and writes included. usd is NULL when unpriced
# (model not in the price table): unknown, never 0. priced_with names the price table's
# version (genai-prices) that computed usd.
turn_usage = Table(
    "turn_usage",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the prose or batch event of the turn
    Column("run_idx", Integer, nullable=False),
    Column("model", Text),  # as the transcript names it
    Column("input_tokens", BigInteger().with_variant(Integer(), "sqlite")),
    Column("output_tokens", BigInteger().with_variant(Integer(), "sqlite")),
    Column("cache_read_tokens", BigInteger().with_variant(Integer(), "sqlite")),
    Column("cache_write_tokens", BigInteger().with_variant(Integer(), "sqlite")),
    Column("usd", Float),
    Column("priced_model", Text),  # the price table's model id
    Column("priced_with", String(40)),  # e.g. "genai-prices 0.2.3"
    Column("price_note", Text),  # why unpriced
    Column("ts", TIME_TEXT),
)

ingest_errors = Table(
    "ingest_errors",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("source_id", Integer, ForeignKey("sources.id", ondelete="CASCADE"), nullable=False),
    Column("line", Integer),
    Column("message", Text, nullable=False),
    Column("excerpt", Text),
    Column("created_at", Float),
)
Index("ix_ingest_errors_source", ingest_errors.c.source_id)

labels = Table(
    "labels",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("run_idx", Integer, nullable=False),
    Column("label", String(20), nullable=False),  # loop | normal | unclear (loopledger.analysis.scoring)
    Column("note", Text),  # the reason the person gave
    Column("created_at", Float),
    # A label judges its session (one per session); run_idx is the run the person was looking at,
    # SESSION_LEVEL when the whole session was judged (an import).
    Column("loop_first", Integer),  # loop labels: 1-based positions of the loop's calls in the session
    Column("loop_last", Integer),
    Column("labelled_by", String(20), nullable=False, server_default="dashboard"),  # imported | dashboard
    Column("by_user", Text),  # who: the signed-in email, or the local user of the CLI (0012_team)
    UniqueConstraint("session_id", "run_idx", name="uq_labels_run"),
)
Index("uq_labels_session", labels.c.session_id, unique=True)

SESSION_LEVEL = -1  # labels.run_idx of a label put on the whole session

# Resume snapshots (loopledger.resume): each policy's replay state per session after `seq` events
# (policy_id "" = the session's own writer context), so an append or a live hook replays only
# what is new. Derived data: deleting a row only costs a full replay next time.
resume_states = Table(
    "resume_states",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("policy_id", String(32), primary_key=True),  # no FK: "" is the session's context
    Column("seq", Integer, nullable=False),  # events applied: the next event's seq
    Column("version", String(64), nullable=False),  # code fingerprint; another one = stale
    Column("state", LargeBinary, nullable=False),  # signed pickle (see loopledger.resume)
    Column("updated_at", Float),
)

# Where a reader can continue a file from (formats that support it): bytes through
# `byte_offset` (line `line`) are read, `state` is the reader's own (signed pickle).
reader_states = Table(
    "reader_states",
    metadata,
    Column("source_id", Integer, ForeignKey("sources.id", ondelete="CASCADE"), primary_key=True),
    Column("format", String(40), nullable=False),
    Column("byte_offset", ByteCount, nullable=False),
    Column("line", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("state", LargeBinary, nullable=False),
)

# ── live enforcement (migration 0007_enforce) ────────────────────────────────────────────────
# Not derived from a transcript: a re-ingest of the session's file keeps these rows.

# Which stored policy the hooks, `guard` and Policy.enforced(db) use: the newest row wins;
# policy_id NULL = back to the default (loopledger.live.enforce.LIVE_DEFAULT, the scored default set).
enforcements = Table(
    "enforcements",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE")),
    Column("set_at", Float, nullable=False),
    Column("origin", Text),  # compare | leaderboard | cli | api | team
    Column("by_user", Text),  # who: the signed-in email, the local user, or the team's (0012_team)
)

# The policies of one enforcement, in the order they were named (migration 0010_livepolicy): one
# row for a single policy, several for a set (each call: the earliest verdict of any of them).
# enforcements.policy_id is the first of them; an enforcement older than this table has none.
enforcement_policies = Table(
    "enforcement_policies",
    metadata,
    Column("enforcement_id", Integer, ForeignKey("enforcements.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE"), nullable=False),
)

# What a live agent reported, in arrival order: the enforced policy's state is a replay of these.
live_events = Table(
    "live_events",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("kind", String(10), nullable=False),  # call | answer | user
    Column("at", Float, nullable=False),  # unix time the hook or guard saw it
    Column("call_id", Text),
    Column("tool", Text),
    Column("args", Text),  # canonical JSON (capped) of a call
    Column("text", Text),  # an answer's or user turn's text (capped)
    Column("text_hash", String(32)),  # digest of the full text
    Column("is_error", Boolean),
)

# Every decision a hook or `guard` made (enforced, not replayed): one per live call.
# The live policy's sealed state after `seq` live events (loopledger.snapshots; migration
# 0008_live): a hook resumes from it; absent, stale or not ours, it replays `live_events`.
live_states = Table(
    "live_states",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("policy_id", String(32), primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("state", LargeBinary, nullable=False),
)

enforced_checks = Table(
    "enforced_checks",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the live_events row of the call
    Column("policy_id", String(32), ForeignKey("policies.id", ondelete="CASCADE"), nullable=False),
    Column("origin", String(20), nullable=False),  # claude-code | gemini-cli | guard | python
    Column("call_id", Text),  # the agent's tool call id (Claude Code: the transcript's tool_use id)
    Column("tool", Text, nullable=False),
    Column("verdict", String(12), nullable=False),  # allow|warn|block|halt|after_halt
    Column("count", Integer),
    Column("threshold", Integer),
    Column("reason", Text),
    Column("at", Float, nullable=False),
    Column("elapsed_ms", Float),  # time the decision took inside the process
)
Index("ix_enforced_checks_call", enforced_checks.c.session_id, enforced_checks.c.call_id)

# ── a team on one ledger (migration 0012_team) ───────────────────────────────────────────────

# Who may sign in to the dashboard beside the allow-list, and with which role
# (loopledger.ledger.team: viewer | labeller | owner).
members = Table(
    "members",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("email", Text, nullable=False, unique=True),  # lower case
    Column("role", String(20), nullable=False),
    Column("added_at", Float, nullable=False),
    Column("added_by", Text),
    # The ID token's `iss` and `sub` (0013_member_identity): a member with a subject is matched by
    # it alone; one without, by a verified email (loopledger.ledger.team.role_of).
    Column("issuer", Text),
    Column("subject", Text),
)
Index("ix_members_identity", members.c.issuer, members.c.subject, unique=True)

# A member's tokens for forwarding to the team's `loopledger receive`: only the SHA-256 digest of
# the token is kept (tokens are 256 random bits, so a plain digest cannot be reversed by guessing).
member_tokens = Table(
    "member_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("member_id", Integer, ForeignKey("members.id", ondelete="CASCADE"), nullable=False),
    Column("name", Text, nullable=False),
    Column("prefix", String(16), nullable=False),  # the token's first characters, to tell tokens apart
    Column("digest", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("created_by", Text),
    Column("revoked_at", Float),
    Column("last_used_at", Float),
)

# On a member's own ledger: the next live event of each session the team's receiver has not
# acknowledged yet (loopledger.live.forward; live_events itself is the outbox).
forwarded = Table(
    "forwarded",
    metadata,
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, nullable=False),
)
