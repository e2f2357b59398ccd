"""The delivery job, one module per step (SPEC DLV-1..7).

* `job`: `deliver`, what an RQ worker runs for a proposal id;
* `claim`: which due proposals this job holds (DLV-1), alone or as a batch;
* `plan`: the checks, budget reservation and attempt row, in the claim's
  transaction (DLV-2..4);
* `send`: each request through the one egress-and-record path
  (`app.services.lifecycle.egress_attempt`), the answer read as a receipt (DLV-5);
* `record`: every outcome of the batch in one transaction, logged and counted.

The delivery rules themselves are the domain's (`app.domain.proposal.delivery`).
"""

from app.services.lifecycle.dispatch.claim import claim, companions_query, take_lease
from app.services.lifecycle.dispatch.job import deliver
from app.services.lifecycle.dispatch.plan import request_body
from app.services.lifecycle.outcomes import DeliveryOutcome

__all__ = ["DeliveryOutcome", "claim", "companions_query", "deliver", "request_body", "take_lease"]
