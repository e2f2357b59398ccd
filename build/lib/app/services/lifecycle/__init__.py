"""The action lifecycle: prepare, approve, deliver, receipts, retry, compensation,
corrections, events, sweeps and workflow runs."""
