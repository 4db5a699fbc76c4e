"""Secret detection for ``flow`` rules (``after: {secret: …}``) and for the
values evidence shows (:mod:`.evidence` redacts what it finds), by Yelp's
detect-secrets.

detect-secrets takes about 0.1 s to import, so it is imported when a policy
with a secret trigger is compiled, never on a hook that does not need it.
Only its detectors of *known credential formats* run (AWS, GitHub, GitLab,
OpenAI, Slack, Stripe, private keys, JWTs, ``password = "…"`` keywords, …):
its two entropy detectors flag every commit hash and base64 blob in ordinary
tool output, which would taint nearly every session.

A value is scanned as one text (the detectors' regexes run over it whole),
up to :data:`SCAN_LIMIT` characters: a secret deeper than that in one tool
result is not seen (documented in docs/rules.md).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ("DETECTORS", "SCAN_LIMIT", "SecretScanner")

#: detect-secrets plugin classes used (credential formats, no entropy).
DETECTORS: Final = frozenset(
    {
        "AWSKeyDetector",
        "ArtifactoryDetector",
        "AzureStorageKeyDetector",
        "BasicAuthDetector",
        "DiscordBotTokenDetector",
        "GitHubTokenDetector",
        "GitLabTokenDetector",
        "JwtTokenDetector",
        "KeywordDetector",
        "MailchimpDetector",
        "NpmDetector",
        "OpenAIDetector",
        "PrivateKeyDetector",
        "PypiTokenDetector",
        "SendGridDetector",
        "SlackDetector",
        "SquareOAuthDetector",
        "StripeDetector",
        "TelegramBotTokenDetector",
        "TwilioKeyDetector",
    }
)

#: Detectors whose regex captures only the token's prefix (``(ghp|gho|...)_``):
#: detect-secrets reports the group ('ghp'), so the whole match is the secret
#: a ``bind: secret`` rule must keep.
WHOLE_MATCH: Final = frozenset({"GitHubTokenDetector", "GitLabTokenDetector"})

#: Characters of one value scanned.
SCAN_LIMIT: Final = 65_536


class SecretScanner:
    """detect-secrets' credential detectors, instantiated once."""

    __slots__ = ("_plugins",)

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import (
            get_mapping_from_secret_type_to_class,
        )

        classes: list[Any] = sorted(
            get_mapping_from_secret_type_to_class().values(),
            key=lambda c: str(c.__name__),
        )
        self._plugins: tuple[Any, ...] = tuple(
            cls() for cls in classes if cls.__name__ in DETECTORS
        )

    def find(self, text: str) -> list[tuple[str, str]]:
        """(secret type, secret value) of every secret found in ``text``,
        in a stable order."""
        text = text[:SCAN_LIMIT]
        found: set[tuple[str, str]] = set()
        for plugin in self._plugins:
            if type(plugin).__name__ in WHOLE_MATCH:
                for regex in plugin.denylist:
                    found.update(
                        (str(plugin.secret_type), m.group(0))
                        for m in regex.finditer(text)
                    )
                continue
            for secret in plugin.analyze_line(filename="tool-output", line=text):
                found.add((str(secret.type), str(secret.secret_value or "")))
        return sorted(found)
