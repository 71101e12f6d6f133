"""The words every detector speaks in the ledger and the UI (design.md, "Policies in the ledger")."""

ALLOW = "allow"
WARN = "warn"
BLOCK = "block"
HALT = "halt"
AFTER_HALT = "after_halt"  # a step after a halt in the same run: not checked, counted as saved
VERDICTS = (ALLOW, WARN, BLOCK, HALT, AFTER_HALT)

REPEATED = "repeated"  # a strike: the answers matched the previous occurrence's
CHANGED = "changed"  # progress: the answers differ
NOT_COMPARABLE = "not_comparable"  # an answer is unknown on either side
NOT_CURRENT = "not_current"  # the batch is no longer the detector's current run
OUTCOMES = (REPEATED, CHANGED, NOT_COMPARABLE, NOT_CURRENT)

# Run outcome per policy, worst verdict wins.
CLEAN, WARNED, BLOCKED, HALTED = "clean", "warned", "blocked", "halted"
RUN_OUTCOMES = (CLEAN, WARNED, BLOCKED, HALTED)

# The tool name of a reply the harness refused to run (a format or parse error): one call
# answered by the harness's error, so what never ran is neither counted as N calls nor
# answered as a success. The readers emit it; progress judges it apart (its arguments are the
# harness's summary of the reply, not an action the agent chose).
HARNESS_ERROR = "harness_error"
# OpenCode names such a call itself: a call it could not repair goes to its `invalid` tool, and a
# person reading an OpenCode session knows it by that name. Judged as a harness refusal alike.
OPENCODE_INVALID = "invalid"
HARNESS_REFUSALS = frozenset({HARNESS_ERROR, OPENCODE_INVALID})

# Event kinds as stored in the ledger.
KIND_USER, KIND_PROSE, KIND_BATCH, KIND_ANSWERS = "user", "prose", "batch", "answers"
KIND_RETRY = "retry"  # a provider retry (events.Retry): shown, never judged
