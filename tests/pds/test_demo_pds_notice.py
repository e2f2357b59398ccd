"""`flask demo --platform atproto` and the DSA notice (SPEC DSA-4, PLAT-5): a PDS has
no notice to a user, so the `pds` installation's notify_user component is retired and
a restriction there queues no notice, while its takedown still works."""

from __future__ import annotations

from sqlalchemy import select

from app.demo import seed_demo
from app.demo_pds import PDS_SLUG, seed_pds_demo
from app.extensions import db
from app.models import ComponentDefinition, ComponentVersion, Installation
from app.services.dsa.notices import notice_component


def test_dsa4_the_pds_demo_offers_no_notice_component(app, pds):
    """DSA-4: on the AT Protocol demo the notice component is retired (nothing to send
    it to) and every other component is the atproto_pds kind; `notice_component` finds
    none, so `send_notice` queues nothing there."""
    seed_pds_demo(pds, seed_demo)
    iid = db.session.scalar(select(Installation.id).where(Installation.slug == PDS_SLUG))
    rows = db.session.execute(
        select(ComponentDefinition.slug, ComponentDefinition.status, ComponentVersion.implementation_kind)
        .join(ComponentVersion, ComponentVersion.definition_id == ComponentDefinition.id)
        .where(ComponentDefinition.installation_id == iid)
    ).all()
    kinds = {slug: (status, kind) for slug, status, kind in rows}
    assert kinds.pop("notify_user")[0] == "retired"
    assert kinds and all(value == ("active", "atproto_pds") for value in kinds.values())
    assert notice_component(db.session, iid, "notify_user") is None
