"""Loop detectors: the three seed guards, the stagnation companion, our cycle and progress detectors, and the
one Policy interface the ledger and the replay engine use. Rules: ../shared/design.md, "Detectors".
"""

# Each name is imported from its module on first use (PEP 562): `import loopledger.detectors.X`
# runs this file first, and a live hook must not pay for every detector to use one of them.
_WHERE = {
    **dict.fromkeys(("answer_key", "answers_hash", "args_hash", "batch_signature", "call_signature",
                     "canonical_bytes", "canonical_json"), "canonical"),
    "CycleDetector": "cycle", "CycleVerdict": "cycle", "ConfigError": "errors",
    "LadderGuard": "ladder", "LadderVerdict": "ladder", "Thresholds": "ladder",
    **dict.fromkeys(("BUILTIN_SPECS", "DEFAULT_SPECS", "DETECTORS", "PARAMS", "Check", "Policy", "PolicySpec",
                     "Result", "make_policy"), "policy"),
    "ProgressDetector": "progress", "ProgressVerdict": "progress",
    **dict.fromkeys(("DEFAULT_OBSERVATION_TOOLS", "BatchRecord", "LoopDetected", "LoopDetector", "RepeatOutcome",
                     "StagnationDetected", "StagnationDetector", "is_costly_batch", "is_observation_batch"),
                    "run_length"),
    "LoopDetectedError": "window", "LoopGuard": "window", "default_key_fn": "window",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
