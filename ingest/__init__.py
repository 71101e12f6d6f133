"""LoopLedger's pipeline: transcript readers → detectors → replay → ledger."""

__version__ = "0.1.0"
