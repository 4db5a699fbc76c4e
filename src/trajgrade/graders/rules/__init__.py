"""trajgrade's own guard rules, judged call by call: ``cost-budget``,
``rate-limit``, ``loop`` and ``flow`` (docs/rules.md), with what they share
(``_shared``: durations, matchers, fingerprints, event time), model prices
(``_prices``) and secret detection (``_secrets``).
"""

__all__: tuple[str, ...] = ()
