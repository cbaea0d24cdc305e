"""Lambda entry point of the flow route (SQS batch -> awsworld runtime). The logic is in the package:
``awsworld.lambda_.flow``; this file only gives the template a short handler path."""

from awsworld.lambda_.flow import handler

__all__ = ["handler"]
