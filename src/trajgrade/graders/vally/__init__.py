"""vally's graders (seeds 000, 003): ``tool-calls`` and the metric
thresholds (``token-budget``, ``tool-call-count``, ``turn-count``,
``error-count``, ``wall-time``). Their regexes are JavaScript's, compiled by
:mod:`trajgrade.graders.matching`.
"""

__all__: tuple[str, ...] = ()
