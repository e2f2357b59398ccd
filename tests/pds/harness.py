"""The tests' PDS launcher: the product's ``app.pds_runtime`` (SPEC PLAT-5), which
``flask demo --platform atproto`` uses too, so the tests run the demo's own code."""

from app.pds_runtime import (  # noqa: F401 (re-exported for the tests)
    Account,
    Pds,
    PdsError,
    Post,
    XrpcError,
    account_subject,
    install,
    record_subject,
    running_pds,
)
