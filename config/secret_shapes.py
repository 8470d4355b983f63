"""What a secret value looks like: the shapes refused in stage files (config/rules.py refuse_secrets, re-exported
there), scanned for in every synth output (ops/secret_scan.py PATTERNS) and cut out of every error message
(config/errors.py). Pure functions of text, no project imports: errors.py imports this module, and rules.py
imports errors.py.

Everything here is linear in the text: each pattern is one left-to-right pass without nested quantifiers that
could backtrack, and the key-like context of a random-looking run is one search for the first key word, not a
search of the text before every run (which was O(n^2): a 200 KiB string of 40-character runs took about a
minute, and YAML aliases repeated it once per alias).
"""

from __future__ import annotations

import math
import re
from collections import Counter

# Shapes with a known prefix or frame: a token of the service, whatever the key it sits under. Each kind once
# (ops/secret_scan.py keys its patterns by the kind without the article).
SECRET_SHAPES = (
    # Hugging Face user access tokens are hf_ + 34 letters and digits; organization API tokens api_org_ + 34.
    ("a Hugging Face token", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}")),
    ("a Hugging Face organization token", re.compile(r"(?<![A-Za-z0-9])api_org_[A-Za-z0-9]{30,}")),
    # AKIA: a long-term access key id, ASIA: a temporary one (STS); ABIA and ACCA: service bearer tokens and
    # context-specific credentials (the unique id prefixes of IAM's "IAM identifiers" page).
    ("an AWS access key id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")),
    # Any PEM or OpenPGP armor header that says PRIVATE KEY: RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8's bare
    # "PRIVATE KEY", and "PGP PRIVATE KEY BLOCK"; any case, spaces tolerated around the dashes.
    ("a private key", re.compile(r"(?i)-----\s?BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?\s?-----")),
    # An OpenSSH private key's body without its header: base64 of "openssh-key-v1\0"; and PuTTY's key file.
    ("an OpenSSH private key", re.compile(r"b3BlbnNzaC1rZXktdjE")),
    ("a PuTTY private key", re.compile(r"PuTTY-User-Key-File-[0-9]+:")),
    ("a GitHub token", re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})")),
    # GitLab's token prefixes (GitLab docs, "Token prefixes"): personal/project/group access (glpat-), OAuth
    # application secret (gloas-), deploy (gldt-), runner authentication (glrt-, glrtr-), CI/CD job (glcbt-),
    # trigger (glptt-), feed (glft-), incoming mail (glimt-), agent for Kubernetes (glagent-), SCIM (glsoat-),
    # feature flags client (glffct-), workspace (glwt-); and the legacy runner registration token GR1348941.
    (
        "a GitLab token",
        re.compile(
            r"(?<![A-Za-z0-9])(?:(?:glpat|gloas|gldt|glrtr|glrt|glcbt|glptt|glft|glimt|glagent"
            r"|glsoat|glffct|glwt)-[A-Za-z0-9_.-]{20,}|GR1348941[A-Za-z0-9_-]{20,})"
        ),
    ),
    # Slack: bot, user, app-level, configuration and refresh tokens (xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxo-,
    # xoxe-, xoxe.xoxp-, xapp-), and incoming webhook URLs (the URL is the secret).
    (
        "a Slack token",
        re.compile(
            r"(?<![A-Za-z0-9])(?:xox[abeoprs](?:\.xox[bp])?-[A-Za-z0-9-]{10,}"
            r"|xapp-[0-9]+-[A-Za-z0-9-]{10,})"
        ),
    ),
    ("a Slack webhook URL", re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}")),
    # Other services' documented token shapes.
    ("an OpenAI API key", re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{0,40}T3BlbkFJ[A-Za-z0-9_-]{16,}")),
    ("an Anthropic API key", re.compile(r"(?<![A-Za-z0-9])sk-ant-[a-z]{3,8}[0-9]{2}-[A-Za-z0-9_-]{32,}")),
    ("a Google API key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}")),
    ("a Stripe secret key", re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_live_[0-9A-Za-z]{20,}")),
    ("an npm token", re.compile(r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}")),
    ("a PyPI token", re.compile(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{30,}")),
    ("a Docker Hub token", re.compile(r"(?<![A-Za-z0-9])dckr_pat_[A-Za-z0-9_-]{20,}")),
    (
        "a JSON Web Token",
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
)

# An AWS secret access key is 40 random base64 characters, with no prefix to recognise it by. A run of exactly
# 40 counts when it looks random (upper, lower and digits, high entropy); under a key-like context (the field's
# key, or a key word before it in the text) that is enough, anywhere else it must also not read like words.
AWS_SECRET_RUN = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
KEY_CONTEXT = re.compile(r"(?i)secret|key|token|passw|credential")
# Any other long random token (an unknown service's API key): 32 or more letters and digits in one run.
RANDOM_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{32,}(?![A-Za-z0-9])")
_UPPER, _LOWER, _DIGIT = re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]")
_WORD = re.compile(r"[a-z]{4,}")
_VOWELS = frozenset("aeiouAEIOU")


def _entropy(run: str) -> float:
    counts = Counter(run)
    return -sum(n / len(run) * math.log2(n / len(run)) for n in counts.values())


def random_looking(run: str, floor: float = 4.2) -> bool:
    """Upper, lower and digits, and at least `floor` bits of entropy per character. Measured on 200,000 random
    40-character base64 keys: 0.125% lack a digit or a case, 0.01% fall below 4.2 bits; a CamelCase phrase
    reaches about 4.3, so this alone does not tell a key from a long name (see `word_like`)."""
    if not (_UPPER.search(run) and _LOWER.search(run) and _DIGIT.search(run)):
        return False
    return _entropy(run) >= floor and run.count("/") <= 3


def word_like(run: str) -> bool:
    """Reads like words run together (`ProjectAlphaBetaGamma2`): at least three lower-case runs of 4+ letters
    (more for a longer run) and 30% vowels among the letters. Of 200,000 random 40-character keys 0.09% read
    like words; of CamelCase names of that length, every one measured did."""
    letters = [ch for ch in run if ch.isalpha()]
    vowels = sum(ch in _VOWELS for ch in letters)
    return len(_WORD.findall(run)) >= max(3, len(run) // 13) and vowels >= 0.3 * max(len(letters), 1)


def find_secret(text: str, key: str = "") -> tuple[str, int, int] | None:
    """(kind, start, end) of the first secret-shaped part of `text` (a string under `key`), or None. One pass
    per pattern, plus one search for the first key word (`text[:start]` has a key word exactly when the first
    key word ends before `start`: no key word contains another, or the start of one)."""
    for kind, pattern in SECRET_SHAPES:
        match = pattern.search(text)
        if match:
            return kind, match.start(), match.end()
    keyed = bool(KEY_CONTEXT.search(key))
    first_word = None if keyed else KEY_CONTEXT.search(text)
    context_from = first_word.end() if first_word else None

    def in_context(start: int) -> bool:
        return keyed or (context_from is not None and context_from <= start)

    for match in AWS_SECRET_RUN.finditer(text):
        run = match.group()
        if random_looking(run) and (in_context(match.start()) or not word_like(run)):
            return "an AWS secret access key", match.start(), match.end()
    for match in RANDOM_RUN.finditer(text):
        run = match.group()
        floor = 4.2 if len(run) >= 40 else 4.0  # 0.1% of random 32-character runs are below 4.08 bits
        if random_looking(run, floor) and (in_context(match.start()) or not word_like(run)):
            return "a random-looking token (an API key or password)", match.start(), match.end()
    return None


def secret_kind(text: str, key: str = "") -> str | None:
    """What secret `text` looks like (a string of the stage file, under `key`), or None."""
    found = find_secret(text, key)
    return found[0] if found else None


def redact(text: str) -> str:
    """`text` with every secret-shaped part replaced by what it looks like: for messages, which may quote what
    was given (a YAML alias or tag name, a duplicate key, a value pydantic refused). One pass of the patterns
    per secret found (messages are short); the placeholder matches no pattern."""
    while True:
        found = find_secret(text)
        if found is None:
            return text
        kind, start, end = found
        text = f"{text[:start]}<{kind}, not shown>{text[end:]}"
