"""Lambda entry point of the webhook route (Function URL -> hook). The logic is in the package:
``awsworld.lambda_host.webhook``; this file only gives the template a short handler path."""

from awsworld.lambda_host.webhook import handler

__all__ = ["handler"]
