"""The AWS World: DynamoDB storage, SQS queue, S3 payloads and streams."""

from .clients import RequestStats
from .config import AWSConfig
from .world import AWSWorld

__all__ = ["AWSConfig", "AWSWorld", "RequestStats"]
