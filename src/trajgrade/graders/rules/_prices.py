"""Dollar prices of model usage: a user table first, then genai-prices.

genai-prices (pydantic/genai-prices, MIT) ships a maintained table with cache
read/write prices, long-context tiers and prices that change over time. It
takes about 0.25 s to import (pydantic), so it is imported the first time a
usage event without ``cost_usd`` has to be priced, never on a hook whose
policy has no ``cost-budget``. Its bundled snapshot is used as installed (it
is never updated over the network), so the same events always cost the same.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec

from trajgrade.graders._spec import ConfigBase

if TYPE_CHECKING:
    from trajgrade.events import Usage

__all__ = ("LATEST", "ModelPrice", "PriceBook")

NonNegative = Annotated[float, msgspec.Meta(ge=0)]

#: The date prices are taken at when a usage event has no timestamp: far in
#: the future, i.e. the newest prices of the table.
LATEST: Final = datetime(9999, 1, 1, tzinfo=UTC)
_LOOKUPS_MAX: Final = 1024


class ModelPrice(ConfigBase):
    """USD per million tokens (genai-prices' field names). Cache reads and
    writes cost the input price unless given."""

    input_mtok: NonNegative = 0.0
    output_mtok: NonNegative = 0.0
    cache_read_mtok: NonNegative | None = None
    cache_write_mtok: NonNegative | None = None


class PriceBook:
    """Prices usage events; None for a model neither table knows."""

    __slots__ = ("_found", "_genai", "_rates", "_snapshot", "_user")

    def __init__(self, user: dict[str, ModelPrice] | None) -> None:
        self._user = user or {}
        #: model -> (provider, model info) or None, from genai-prices.
        self._found: dict[str, Any] = {}
        self._genai: Any = None
        self._snapshot: Any = None
        #: id(genai-prices ModelPrice) -> (tier starts, per-token rates per tier).
        self._rates: dict[int, Any] = {}

    def cost(self, u: Usage) -> float | None:
        """USD of ``u``'s tokens (input includes cache tokens; output
        includes reasoning tokens, which cost the output price)."""
        counts = _counts(u)
        if not (counts[0] or counts[3]):
            return 0.0
        model = u.model
        if not model:
            return None
        own = self._user.get(model)
        if own is not None:
            return _user_cost(own, counts)
        return self._table_cost(model, u, counts)

    def _table_cost(
        self, model: str, u: Usage, counts: tuple[int, int, int, int]
    ) -> float | None:
        found = self._found.get(model, _MISSING)
        if found is _MISSING:
            found = self._lookup(model)
            if len(self._found) < _LOOKUPS_MAX:
                self._found[model] = found
        if found is None:
            return None
        provider, info = found
        when = _date(u.ts)
        try:
            price = info.get_prices(when)
            rates = self._rates.get(id(price))
            if rates is None:
                rates = self._linear(info, provider, when, price)
                if len(self._rates) < _LOOKUPS_MAX:
                    # Keyed by identity: the snapshot's price objects live
                    # as long as the process (it is never updated).
                    self._rates[id(price)] = rates
        except (ValueError, ArithmeticError, LookupError):
            return None
        starts, bands = rates
        inp, read, write, output = counts
        band = sum(inp > s for s in starts)
        fresh, out, read_rate, write_rate = bands[band]
        return (
            (inp - read - write) * fresh
            + read * read_rate
            + write * write_rate
            + output * out
        )

    def _linear(
        self, info: Any, provider: Any, when: datetime, price: Any
    ) -> tuple[tuple[int, ...], list[tuple[float, float, float, float]]]:
        """Per-token rates of ``price`` in each of its input-size tiers.

        genai-prices' own calculation takes about 0.1 ms per call; within a
        tier (a tier applies when a request's input tokens exceed its start)
        the price is linear in each token count, so the rates are taken once
        from genai-prices itself at one input size inside each tier.
        """
        starts = sorted(
            {
                t.start
                for v in vars(price).values()
                for t in getattr(v, "tiers", None) or ()
            }
        )
        usage = self._genai.Usage

        def cost(**tokens: int) -> float:
            calc = info.calc_price(
                usage(**tokens), provider, genai_request_timestamp=when
            )
            return float(calc.total_price)

        bands = []
        for n in [starts[0] if starts else 1_000_000, *(s + 1 for s in starts)]:
            n = max(n, 1)
            base = cost(input_tokens=n)
            bands.append(
                (
                    base / n,
                    (cost(input_tokens=n, output_tokens=n) - base) / n,
                    cost(input_tokens=n, cache_read_tokens=n) / n,
                    cost(input_tokens=n, cache_write_tokens=n) / n,
                )
            )
        return tuple(starts), bands

    def _lookup(self, model: str) -> Any:
        if self._snapshot is None:
            import genai_prices
            from genai_prices import data_snapshot

            # Threads share a compiled grader: another one may look up while
            # this one imports. The snapshot is the "ready" flag, so it is
            # set last (it was set after a flag: a lookup in that gap read
            # None and the trace got an error verdict).
            self._genai = genai_prices
            self._snapshot = data_snapshot.get_snapshot()
        try:
            return self._snapshot.find_provider_model(model, None, None, None)
        except (LookupError, ValueError):
            return None


_MISSING: Final = object()
#: The date of an event dated before any calendar (a hostile ts).
_EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _date(ts: float | None) -> datetime:
    """The date ``ts`` prices an event at: the newest prices without one,
    or for one past year 9999 (or not a number), the oldest for one before
    year 1; never an error, which would end the budget's judging."""
    if ts is None or ts != ts:
        return LATEST
    try:
        return datetime.fromtimestamp(ts, UTC)
    except (OverflowError, ValueError, OSError):
        return LATEST if ts > 0 else _EARLIEST


def _counts(u: Usage) -> tuple[int, int, int, int]:
    """(input, cache read, cache write, output) tokens of ``u``, none below
    zero: a negative count (a broken or hostile log) is no refund, it counts
    as none; cache tokens are part of the input, so they never exceed it."""
    inp = max(0, u.input_tokens)
    read = min(max(0, u.cache_read_tokens), inp)
    write = min(max(0, u.cache_write_tokens), inp - read)
    return inp, read, write, max(0, u.output_tokens)


def _user_cost(p: ModelPrice, counts: tuple[int, int, int, int]) -> float:
    inp, read, write, output = counts
    fresh = inp - read - write
    read_price = p.input_mtok if p.cache_read_mtok is None else p.cache_read_mtok
    write_price = p.input_mtok if p.cache_write_mtok is None else p.cache_write_mtok
    return (
        fresh * p.input_mtok
        + read * read_price
        + write * write_price
        + output * p.output_mtok
    ) / 1_000_000
