"""The one configuration error every detector and policy raises."""

from __future__ import annotations


class ConfigError(ValueError):
    """A detector or policy was configured wrongly. `field` names the parameter, `rule` the rule
    that broke (e.g. "threshold <= window"), so a form or a CLI can point at it."""

    def __init__(self, field: str, rule: str, message: str | None = None) -> None:
        self.field = field
        self.rule = rule
        super().__init__(message or f"{field}: {rule}")
