"""Checks of the pages the service serves itself (``/docs``, ``/``): their links, and whether one leaves the host."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit


class Links(HTMLParser):
    """Every ``src`` and ``href`` of a page, in order (``feed`` the page, read ``urls``)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def external(url: str, base: str) -> bool:
    """Whether ``url``, read on the page at ``base``, points at another host (http or https)."""
    parts = urlsplit(urljoin(base, url))
    return parts.scheme in ("http", "https") and parts.netloc != urlsplit(base).netloc
