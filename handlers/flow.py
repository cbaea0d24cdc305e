"""Lambda entry point of the flow route (SQS batch -> awsworld runtime). The logic is in the package:
``awsworld.lambda_host.flow``; this file only gives the template a short handler path."""

from awsworld.lambda_host.flow import handler

__all__ = ["handler"]
