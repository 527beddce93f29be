"""What the registry's tests share: a small JSON-over-HTTP client of the registry."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class Answer:
    def __init__(self, status: int, body: Any, content_type: str) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type


def call(url: str, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Answer:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": MEDIA_TYPE}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
            status, ctype = response.status, response.headers.get_content_type()
    except urllib.error.HTTPError as e:
        text, status, ctype = e.read(), e.code, e.headers.get_content_type()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text.decode()
    return Answer(status, parsed, ctype)
