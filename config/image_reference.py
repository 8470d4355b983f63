"""What a container image reference may be: one a registry can serve and that names one image for good.

Parsed by the OCI distribution grammar (distribution/reference, regexp.go and reference.go): a registry host with
an optional port, lower-case path components joined by '.', '_', '__' or dashes, a tag of up to 128 word
characters, '.' and '-', and a digest. Here a reference must pin its image: a tag other than `latest` (an untagged
reference pulls `latest`, which moves) or a sha256 digest, and never the tag `latest`."""

from __future__ import annotations

import re

_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
# A TCP port, 1 to 65535 without leading zeros (a registry on port 0 or 70000 cannot be reached).
PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
# The one digest registries and containerd verify by default: sha256, exactly 64 lower-case hex digits
# (opencontainers/go-digest, algorithm.go: a sha256 digest's hex is 64 characters of [a-f0-9]).
DIGEST = r"sha256:[a-f0-9]{64}"
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
IMAGE_REFERENCE = re.compile(
    rf"(?:(?P<domain>{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*)(?::(?P<port>[0-9]+))?/)?"
    rf"{_PATH_PART}(?:/{_PATH_PART})*(?::(?P<tag>[^@/]*))?(?:@(?P<digest>.*))?"
)
MOVING_TAG = "latest"


def image_problem(image: str) -> str | None:
    """None when `image` is a reference a registry can serve that pins one image, else what is wrong with it."""
    match = IMAGE_REFERENCE.fullmatch(image)
    if match is None:
        return "is not an image reference"
    port, tag, digest = match.group("port"), match.group("tag"), match.group("digest")
    if port is not None and not re.fullmatch(PORT, port):
        return f"names registry port {port[:12]}, not a TCP port from 1 to 65535"
    if digest is not None and not re.fullmatch(DIGEST, digest):
        return "has a digest that is not sha256: and 64 lower-case hex digits"
    if tag is not None and not re.fullmatch(TAG, tag):
        return "has a tag that is not 1-128 letters, digits, '_', '.' and '-' (not starting with '.' or '-')"
    if tag is None and digest is None:
        return f"has no tag or digest, so it pulls {MOVING_TAG}, which moves"
    if tag is not None and tag.lower() == MOVING_TAG:
        return f"is tagged {tag}, which moves to whatever image was pushed last"
    return None
