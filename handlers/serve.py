"""Lambda entry point of the World server (awsworld serve, Function URL with IAM auth). The logic is in the package:
``awsworld.lambda_host.serve``; this file only gives the template a short handler path."""

from awsworld.lambda_host.serve import handler

__all__ = ["handler"]
