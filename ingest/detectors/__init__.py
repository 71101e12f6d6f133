"""Loop detectors: the three seed guards, the stagnation companion, our cycle and progress detectors, and the
one Policy interface the ledger and the replay engine use. Rules: ../shared/design.md, "Detectors".
"""

from loopledger.detectors.canonical import (
    answer_key,
    answers_hash,
    args_hash,
    batch_signature,
    call_signature,
    canonical_bytes,
    canonical_json,
)
from loopledger.detectors.cycle import CycleDetector, CycleVerdict
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.ladder import LadderGuard, LadderVerdict, Thresholds
from loopledger.detectors.policy import (
    BUILTIN_SPECS,
    DEFAULT_SPECS,
    DETECTORS,
    PARAMS,
    Check,
    Policy,
    PolicySpec,
    Result,
    make_policy,
)
from loopledger.detectors.progress import ProgressDetector, ProgressVerdict
from loopledger.detectors.run_length import (
    DEFAULT_OBSERVATION_TOOLS,
    BatchRecord,
    LoopDetected,
    LoopDetector,
    RepeatOutcome,
    StagnationDetected,
    StagnationDetector,
    is_costly_batch,
    is_observation_batch,
)
from loopledger.detectors.window import LoopDetectedError, LoopGuard, default_key_fn

__all__ = [
    "BUILTIN_SPECS", "DEFAULT_OBSERVATION_TOOLS", "DEFAULT_SPECS", "DETECTORS", "PARAMS",
    "BatchRecord", "Check", "ConfigError", "CycleDetector", "CycleVerdict", "LadderGuard",
    "LadderVerdict", "LoopDetected", "LoopDetectedError", "LoopDetector", "LoopGuard", "Policy",
    "PolicySpec", "ProgressDetector", "ProgressVerdict", "RepeatOutcome", "Result", "StagnationDetected", "StagnationDetector",
    "Thresholds", "answer_key", "answers_hash", "args_hash", "batch_signature", "call_signature",
    "canonical_bytes", "canonical_json", "default_key_fn", "is_costly_batch",
    "is_observation_batch", "make_policy",
]
