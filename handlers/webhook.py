"""Lambda entry point of the webhook route (Function URL -> hook). The logic is in the package:
``awsworld.lambda_.webhook``; this file only gives the template a short handler path."""

from awsworld.lambda_.webhook import handler

__all__ = ["handler"]
