"""The old path of ``awsworld.lambda_host.webhook``, which handler files written before the rename import."""

from awsworld.lambda_host.webhook import handler  # names: keep

__all__ = ["handler"]
