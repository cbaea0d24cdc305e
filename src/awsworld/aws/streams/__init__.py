"""Streams: chunks in S3, their index in DynamoDB, write sessions and readers."""
