"""The throughput baseline: a plain RQ job that POSTs a body to the platform."""

from __future__ import annotations

import requests


def post(url: str, body: bytes, key: str) -> int:
    response = requests.post(
        url, data=body, headers={"Content-Type": "application/json", "Idempotency-Key": key}, timeout=30
    )
    return response.status_code
