"""The queue on SQS: envelopes, idempotency-key dedup markers, deliveries."""
