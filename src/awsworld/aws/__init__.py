"""The AWS World: DynamoDB storage, SQS queue, S3 payloads and streams.

It runs on botocore, which awsworld does not install (Lambda's runtime has it; see ``sdk``): without it, say
what to install rather than fail on the first module that names a botocore exception.
"""

try:
    import botocore.exceptions  # noqa: F401
except ImportError as missing:
    raise ImportError("the AWS World needs botocore: Lambda's Python runtime provides it; elsewhere install "
                      "'awsworld[aws-sdk]' (boto3 and botocore)") from missing

from .clients import RequestStats
from .config import AWSConfig
from .world import AWSWorld

__all__ = ["AWSConfig", "AWSWorld", "RequestStats"]
