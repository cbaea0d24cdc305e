"""Per-run payload encryption at rest (opt-in with ``AWSWORLD_KMS_KEY_ID``): a KMS data key per run, AES-GCM
on every user value and stream chunk before it reaches DynamoDB or S3."""
