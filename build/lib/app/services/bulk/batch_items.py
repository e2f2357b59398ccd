"""A page of a batch's items in position order (SPEC BULK-2, BULK-6): the full list
behind the counts, for the batch's JSON and pages."""

from __future__ import annotations

from sqlalchemy import select

from app.models import BulkItem

MAX_PAGE = 1000


def items_page(session, batch_id: str, *, offset: int = 0, limit: int = 100) -> list[BulkItem]:
    """Items of `batch_id` at positions ``offset .. offset + limit - 1`` (one query on
    the (batch_id, position) unique index).

    Args:
        offset: items to skip, ≥ 0.
        limit: 0..1,000 items.

    Raises:
        ValueError: an offset or limit out of range.
    """
    if offset < 0 or not 0 <= limit <= MAX_PAGE:
        raise ValueError("offset ≥ 0 and limit 0..1,000")
    return list(session.scalars(
        select(BulkItem).where(BulkItem.batch_id == batch_id, BulkItem.position >= offset)
        .order_by(BulkItem.position).limit(limit)
    ))
