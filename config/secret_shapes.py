"""What a secret value looks like: the shapes refused in stage files (config/rules/secret_values.py refuse_secrets,
re-exported by config/rules/), scanned for in every synth output (config/secret_scan.py PATTERNS) and cut out of
every error message (config/errors.py). Pure functions of text, no project imports: errors.py imports this
module, and the rules import errors.py.

Everything here is linear in the text: each pattern is one left-to-right pass without nested quantifiers that
could backtrack, and the key-like context of a random-looking run is one search for the first key word, not a
search of the text before every run (which was O(n^2): a 200 KiB string of 40-character runs took about a
minute, and YAML aliases repeated it once per alias). A shape that a pattern finds and a test confirms (a
vendor's prefix and a token part, a secret-like name and its value) tests each match once.

Shapes are described by class, not listed value by value: a key is secret-like by what its words mean, in any
case or separator (`secret_like_key`); under one, or after a secret-like name in text, a long run of one
alphabet is a secret (`keyed_token`); a vendor's prefix is letters (a digit may follow) and _ or - before a
random token part; a key file's header has four or five dashes; a URL's userinfo with a password is refused
wherever it is.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator

# Shapes with a known prefix or frame, each kind once (config/secret_scan.py keys its patterns by it); each
# pattern begins with its literal prefix, which the regex engine finds fast.
# Why: docs/DECISIONS.md, "The secret scan's framed shapes".
_FRAMED_SHAPES = (
    # Hugging Face user access tokens are hf_ + 34 letters and digits; organization API tokens api_org_ + 34.
    ("a Hugging Face token", re.compile(r"hf_(?<![A-Za-z0-9]hf_)[A-Za-z0-9]{30,}")),
    ("a Hugging Face organization token", re.compile(r"api_org_(?<![A-Za-z0-9]api_org_)[A-Za-z0-9]{30,}")),
    # AKIA: a long-term access key id, ASIA: a temporary one (STS); ABIA and ACCA: service bearer tokens and
    # context-specific credentials (the unique id prefixes of IAM's "IAM identifiers" page).
    ("an AWS access key id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")),
    # Any PEM or OpenPGP armor header that says PRIVATE KEY: RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8's bare
    # "PRIVATE KEY", and "PGP PRIVATE KEY BLOCK"; any case, spaces tolerated around the dashes, and four dashes
    # as well as five (RFC 4716's frame, which ssh.com's and other tools' private keys use too).
    ("a private key", re.compile(r"(?i)-{4,5}\s?BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?\s?-{4,5}")),
    # RFC 4716's SSH2 key file, public or private ("---- BEGIN SSH2 PUBLIC KEY ----"): a pasted key file, which
    # no setting of a stage file and nothing a synth writes holds.
    ("an SSH2 key file", re.compile(r"(?i)-{4,5}\s?BEGIN SSH2 [A-Z0-9 ]{0,40}KEY\s?-{4,5}")),
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
    ("an OpenAI API key", re.compile(r"sk-(?<![A-Za-z0-9]sk-)[A-Za-z0-9_-]{0,40}T3BlbkFJ[A-Za-z0-9_-]{16,}")),
    ("an Anthropic API key", re.compile(r"sk-ant-(?<![A-Za-z0-9]sk-ant-)[a-z]{3,8}[0-9]{2}-[A-Za-z0-9_-]{32,}")),
    ("a Google API key", re.compile(r"AIza(?<![A-Za-z0-9]AIza)[0-9A-Za-z_-]{35}")),
    ("a Stripe secret key", re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,}")),
    # Twilio's API key SID: SK and 32 hex digits (the one vendor shape here with no separator after its prefix).
    ("a Twilio API key", re.compile(r"SK(?<![A-Za-z0-9]SK)[0-9a-fA-F]{32}(?![A-Za-z0-9])")),
    ("an npm token", re.compile(r"npm_(?<![A-Za-z0-9]npm_)[A-Za-z0-9]{36}")),
    ("a PyPI token", re.compile(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{30,}")),
    ("a Docker Hub token", re.compile(r"dckr_pat_(?<![A-Za-z0-9]dckr_pat_)[A-Za-z0-9_-]{20,}")),
    # Microsoft Entra ID (Azure AD) client secrets: 3 characters, a digit, "Q~", then 31-34 of the same alphabet
    # with '-' (the ~ and . split them into short runs that no random-run shape sees).
    (
        "an Azure AD client secret",
        re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
    ),
)

# An AWS secret access key is 40 random base64 characters, with no prefix to recognise it by. A run of exactly
# 40 counts when it looks random (upper, lower and digits, high entropy); under a key-like context (the field's
# key, or a key word before it in the text) that is enough, anywhere else it must also not read like words.
AWS_SECRET_RUN = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
KEY_CONTEXT = re.compile(r"(?i)secret|key|token|pass|pwd|auth|credential")
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


# --- The key class: what a key's words mean ----------------------------------------------------------------
# A key's words: split at separators and at camelCase and acronym boundaries (APIKey: API, Key; dbPassword:
# db, Password), so every case and separator of one name is one key.
_KEY_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A word that says the value is a secret, also at the end of words run together (dbpassword, authtoken,
# clientsecret, apikey). "tokens" is not one: in this project it counts an LLM's tokens (max_num_batched_tokens).
_SECRET_ENDINGS = (
    "password", "passwd", "passphrase", "pwd", "secret", "token", "credential", "credentials", "creds",
    "apikey", "accesskey", "secretkey", "privatekey", "signingkey", "authkey", "oauth", "bearer",
)  # fmt: skip
# Only as whole words: bypass, compass, passenger and author are not secrets.
_SECRET_WORDS = frozenset({"pass", "pw", "auth", "authorization"})
# "key" alone names many things (an S3 object key, a KMS key, a tag key): a secret only after one of these.
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "signing", "client", "auth", "master",
                             "encryption", "session", "shared", "hmac", "webhook", "license"})  # fmt: skip
# A key that ends in one of these names where a secret is kept or says something about it (token_path,
# secret_arn, kms_key_arn, hf_token_path); one with a quantity word counts tokens (kv_bytes_per_token).
_REFERENCE_ENDINGS = frozenset({
    "arn", "arns", "id", "ids", "name", "names", "path", "paths", "file", "files", "dir", "ref", "refs", "url",
    "uri", "type", "kind", "env", "length", "len", "count", "size", "threshold", "limit", "budget", "ttl",
    "timeout", "rotation", "mode", "enabled", "required", "usage", "version",
})  # fmt: skip
_QUANTITY_WORDS = frozenset({"max", "min", "num", "per", "bytes"})


def names_a_secret(key: str) -> bool:
    """Whether `key` is the name of a secret value itself (db_password, client_secret, api_key, authToken): its last
    word is a secret word. Under such a key any value is the secret, however short; `auth_team` or
    `token_budget` name something about one."""
    words = [word.lower() for word in _KEY_WORD.findall(key[:256])]
    if not words or _QUANTITY_WORDS.intersection(words):
        return False
    last, before = words[-1], words[-2] if len(words) > 1 else ""
    return last in _SECRET_WORDS or last.endswith(_SECRET_ENDINGS) or (last == "key" and before in _KEY_QUALIFIERS)


def secret_like_key(key: str) -> bool:
    """Whether a value under `key` is meant to be a secret (password, pwd, pass, auth, token, api key, client
    secret, credentials), judged on the key's words in any case or separator, not on a substring of it."""
    words = [word.lower() for word in _KEY_WORD.findall(key[:256])]
    if not words or words[-1] in _REFERENCE_ENDINGS or _QUANTITY_WORDS.intersection(words):
        return False
    for before, word in zip(["", *words], words, strict=False):
        if word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS):
            return True
        if word == "key" and before in _KEY_QUALIFIERS:
            return True
    return False


# --- Runs of one alphabet ------------------------------------------------------------------------------------
# The alphabets a token is drawn from, smallest first: the first that holds a run sets how random it can be.
_ALPHABETS = (
    (frozenset("0123456789"), 10),
    (frozenset("0123456789abcdef"), 16),
    (frozenset("0123456789ABCDEF"), 16),
    (frozenset("0123456789abcdefghijklmnopqrstuvwxyz"), 36),  # lower-case tokens (base36)
    (frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"), 36),  # base32 and upper-case tokens
)
_LETTER = re.compile(r"[A-Za-z]")
_TRANSITION = re.compile(r"[A-Za-z](?=[0-9])|[0-9](?=[A-Za-z])")
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xzB-DF-HJ-NP-TV-XZ]{5,}")


def _alphabet_size(run: str) -> int:
    chars = set(run)
    return next((size for alphabet, size in _ALPHABETS if chars <= alphabet), 62)


def _reads_like_words(run: str) -> bool:
    """Words and numbers run together (`hftoken2025production`, `kuberay2operator15system`): 30% vowels among
    the letters, no five consonants in a row, and at most four switches between letters and digits. Random
    runs rarely do all three: of 20,000 each, 1% of 20-character lower-case or upper-case runs, 3% of base32
    and 4% of base62 ones, and almost none of 32 characters."""
    letters = _LETTER.findall(run)
    vowels = sum(ch in _VOWELS for ch in letters)
    if vowels < 0.3 * max(len(letters), 1) or _CONSONANTS.search(run):
        return False
    return len(_TRANSITION.findall(run)) <= 4


def random_in_alphabet(run: str, min_length: int = 16, hex_length: int | None = 16) -> bool:
    """A run of letters and digits that reads as random within its own alphabet (hex, base32, lower- or
    upper-case letters and digits, base62), not only when it mixes upper case, lower case and digits: at least
    `min_length` long (`hex_length` for hex; None: hex does not count), letters and digits (or 20+ digits),
    at least 70% of the entropy its alphabet allows at its length, and not words run together. Of 20,000
    random runs each, this misses 0.3% of 20-hex-digit runs, 1% of 20-character lower- or upper-case ones,
    4% of base32 and 6% of base62 ones (those lack a digit or read as words), and almost none of 32."""
    size = _alphabet_size(run)
    if size == 16 and (hex_length is None or len(run) < hex_length):
        return False
    has_letter = _LETTER.search(run) is not None
    if len(run) < min_length or not _DIGIT.search(run) or (not has_letter and len(run) < 20):
        return False
    if _entropy(run) < 0.7 * math.log2(min(len(run), size)):
        return False
    return size in (10, 16) or not _reads_like_words(run)


# Under a secret-like key: a run of letters and digits; a base64 or base64url run with its + / - _ (few of
# them: a name has a separator every few characters, a token about one in 32); or a UUID (some services'
# API keys are UUIDs).
_ALNUM_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{16,}")
_TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}")
_UUID = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])")
_SEPARATOR = re.compile(r"[+/_-]")


def keyed_token(text: str) -> tuple[int, int] | None:
    """(start, end) of the first token-shaped run in `text`, a value meant to be a secret (under a secret-like
    key or after a secret-like name), or None: there a run of one alphabet is enough."""
    for match in _ALNUM_RUN.finditer(text):
        if random_in_alphabet(match.group()):
            return match.span()
    for match in _TOKEN_RUN.finditer(text):
        run = match.group()
        few_separators = len(_SEPARATOR.findall(run)) <= max(1, len(run) // 12)
        if few_separators and random_looking(run, 3.6) and not word_like(run):
            return match.span()
    uuid = _UUID.search(text)
    return uuid.span() if uuid else None


# --- Shapes that a pattern finds and a test confirms -------------------------------------------------------


class _Checked:
    """A pattern whose matches count only when `test` passes on them, searched like a compiled pattern
    (config/secret_scan.py calls finditer, find_secret calls search): still one pass, each match tested once."""

    def __init__(self, pattern: str, test: Callable[[re.Match[str]], bool]) -> None:
        self.pattern, self.test = re.compile(pattern), test

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return (match for match in self.pattern.finditer(text) if self.test(match))

    def search(self, text: str) -> re.Match[str] | None:
        return next(self.finditer(text), None)


def _vendor_body(match: re.Match[str]) -> bool:
    """A vendor's prefix (letters, then words or a version after _ or -: ghp_, sk-proj-, dop_v1_, lin_api_,
    tskey-auth-) followed by a token part: 20+ random letters and digits; hex counts (32+) only after an
    underscore, since names and labels join a hash with a dash (cdk.out's kubectl `prune-<hash>` label)."""
    for part in re.finditer(r"([_-])([A-Za-z0-9]+)", match.group()):
        hex_length = 32 if part.group(1) == "_" else None
        if random_in_alphabet(part.group(2), 20, hex_length):
            return True
    return False


def _dotted_body(match: re.Match[str]) -> bool:
    """A short prefix and a dot (SendGrid's SG., Vault's hvs., Google OAuth's ya29.): the part after it mixes
    upper case, lower case and digits at random (an asset.<hash> file name is lower-case hex, a module path is
    words)."""
    body = match.group("body")
    return random_looking(body, 3.6) and not word_like(body)


def _jwt_header(match: re.Match[str]) -> bool:
    """A JWS or JWE (RFC 7515, 7516): its first part is base64url JSON with the "alg" every JWT must name, whatever
    follows (an unsecured JWT, alg none, has an empty signature and is still a bearer credential)."""
    head = match.group("head")
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested past json's recursion: no JWT header
        return False
    return isinstance(header, dict) and "alg" in header


def _bearer_token(match: re.Match[str]) -> bool:
    """`Bearer` and a token (RFC 6750's b64token): any token with a digit, or 16 characters and more (a word of
    prose after `bearer` has no digit and is shorter)."""
    token = match.group("token")
    return _DIGIT.search(token) is not None or len(token) >= 16


def _suffixed_body(match: re.Match[str]) -> bool:
    """A random token with a provider's datacenter suffix (Mailchimp's <32 hex>-us21): the body alone decides."""
    return random_in_alphabet(match.group("body"), 20, 32)


# The name before a `:` or `=`, read backwards from it (reversed text): blanks and a quote, then the name.
_NAME_REVERSED = re.compile(r"""[ \t]{0,4}["']?(?P<name>[A-Za-z0-9_.-]{1,64})""")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_]")


def _assigned(match: re.Match[str]) -> bool:
    """`name=value` or `"name": "value"` in a text, with a secret-like name: the value is judged as under that
    key (a run of one alphabet is enough). The pattern starts at the `:` or `=` (a fast scan for one
    character, where a pattern starting at every name was the scan's slowest) and the name is read back."""
    before = match.string[max(0, match.start() - 72) : match.start()][::-1]
    name = _NAME_REVERSED.match(before)
    if name is None:
        return False
    return secret_like_key(name.group("name")[::-1]) and keyed_token(match.group("value")) is not None


def _paired(match: re.Match[str]) -> bool:
    """`name: X_PASSWORD` then `value: ...`: the pattern starts at "ame" (a literal: a fast scan); the N or n
    before it, not inside a longer word, is checked here."""
    text, start = match.string, match.start()
    if start < 1 or text[start - 1] not in "Nn" or (start >= 2 and _NAME_CHAR.match(text, start - 2)):
        return False
    return secret_like_key(match.group("name")) and keyed_token(match.group("value")) is not None


# A prefix word (a letter, then letters or digits: sq0atp, p8e), then parts after _ or -, one of them 20+ long (only then is a part tested in Python). Each
# part ends at the next separator, so the lazy repeat tries each part once: linear.
_VENDOR = r"(?<![A-Za-z0-9_.-])[A-Za-z][A-Za-z0-9]{1,11}(?:[_-][A-Za-z0-9]+)*?[_-][A-Za-z0-9]{20,}(?:[_-][A-Za-z0-9]+)*"
# A value of 16 characters or more (no shorter one holds a token: checked here, not per match in Python); it
# stops at a : or = too, so `x=a:password=...` leaves the second name to be read.
_VALUE = r"""(?P<value>[^\s"'`,;:=&<>(){}\[\]]{16,4096})"""
_CHECKED_SHAPES = (
    # scheme://user:password@host: the password is in the URL, whatever the scheme. Linear: the user part
    # stops at the first : / ? # @ or blank, the password at the first / ? # @ or blank.
    (
        "a URL with a password in it",
        re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/?#@:\"'<>]*:[^\s/?#@\"'<>]+@"),
    ),
    ("a vendor token", _Checked(_VENDOR, _vendor_body)),
    (
        "a dotted vendor token",
        _Checked(r"(?<![A-Za-z0-9_.-])[A-Za-z][A-Za-z0-9]{1,4}\.(?P<body>[A-Za-z0-9_-]{20,})", _dotted_body),
    ),
    # header.payload.signature, each base64url; a JSON object's base64 starts e (then y or w, '{"' or '{ ').
    (
        "a JSON Web Token",
        _Checked(
            r"(?<![A-Za-z0-9_-])(?P<head>e[wy][A-Za-z0-9_-]{6,})\.e[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*", _jwt_header
        ),
    ),
    # The Authorization scheme (RFC 6750 2.1; schemes are case-insensitive, RFC 9110 11.1) and its token.
    (
        "a bearer token",
        _Checked(r"(?i)(?<![A-Za-z0-9_-])bearer[ \t]+(?P<token>[A-Za-z0-9._~+/-]{8,})=*", _bearer_token),
    ),
    # A token and a datacenter suffix after a dash (Mailchimp API keys end -us1 to -us21).
    (
        "a token with a datacenter suffix",
        _Checked(
            r"(?<![A-Za-z0-9_.-])(?P<body>[A-Za-z0-9]{20,})-[a-z]{2,4}[0-9]{1,3}(?![A-Za-z0-9_.-])", _suffixed_body
        ),
    ),
)
# A secret-like name given a value in text: `db_password=...`, `"ApiKey": "..."`, `x-auth-token: ...`; and the
# name/value pairs of environment variables (Kubernetes YAML, CloudFormation JSON). find_secret tries them after
# the random runs, so a value that is also an AWS secret access key is reported as one.
_NAMED_SHAPES = (
    (
        "a token under a secret-like name",
        _Checked(
            r"""[:=][ \t]{0,4}["']?""" + _VALUE,
            _assigned,
        ),
    ),
    (
        "a token in a secret-like variable",
        _Checked(
            r"""ame["']?[ \t]{0,4}:[ \t]{0,4}["']?(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,63})"""
            r"""["']?[ \t]{0,4},?\s{0,64}["']?[Vv]alue["']?[ \t]{0,4}:[ \t]{0,4}["']?""" + _VALUE,
            _paired,
        ),
    ),
)
SECRET_SHAPES = _FRAMED_SHAPES + _CHECKED_SHAPES + _NAMED_SHAPES


# A Secrets Manager secret's ARN: where a secret is kept, not the secret.
_SECRETS_MANAGER_ARN = re.compile(r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+")


def find_secret(text: str, key: str = "", reference: bool = False) -> tuple[str, int, int] | None:
    """(kind, start, end) of the first secret-shaped part of `text` (a string under `key`), or None. One pass
    per pattern, plus one search for the first key word (`text[:start]` has a key word exactly when the first
    key word ends before `start`: no key word contains another, or the start of one). Under a key that names a
    secret any non-blank value is one, unless `reference` (a field the schema fills with a secret's name or
    ARN) or the value is a Secrets Manager ARN."""
    keyed = secret_like_key(key)
    found = _first_match(text, _FRAMED_SHAPES + _CHECKED_SHAPES) or _random_run(text, keyed)
    found = found or _first_match(text, _NAMED_SHAPES)
    if found is None and keyed:
        span = keyed_token(text)
        found = ("a token under a secret-like key", *span) if span else None
    if found is None and not reference and names_a_secret(key) and text.strip():
        found = None if _SECRETS_MANAGER_ARN.fullmatch(text) else ("a value under a secret-like key", 0, len(text))
    return found


def _first_match(text: str, shapes: tuple) -> tuple[str, int, int] | None:
    for kind, pattern in shapes:
        match = pattern.search(text)
        if match:
            return kind, match.start(), match.end()
    return None


def _random_run(text: str, keyed: bool) -> tuple[str, int, int] | None:
    """A run that mixes upper case, lower case and digits at random: an AWS secret access key (40) or another
    token (32+). One that reads like words counts only in a key-like context (the key, or a key word before
    it in the text)."""
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


def secret_kind(text: str, key: str = "", reference: bool = False) -> str | None:
    """What secret `text` looks like (a string of the stage file, under `key`), or None."""
    found = find_secret(text, key, reference)
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
